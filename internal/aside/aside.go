// Package aside runs a call on a goroutine of its own and waits for it.
//
// A goroutine's stack grows to the deepest call it ever made and, while the goroutine stays
// busy at a moderate depth, does not shrink: a request that made one deep call (matching a
// node, a database write, net/http writing a response's header) and then holds a stream open
// for minutes keeps a 16 or 32 KiB stack all along. Run makes the deep call on a goroutine
// that exits, whose stack is freed at once, so that the request's goroutine stays at 8 KiB.
package aside

// Run runs fn on a goroutine of its own and waits for it. A panic in fn is raised again in
// the caller, as if fn had run there.
func Run(fn func()) {
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		fn()
	}()
	if p := <-done; p != nil {
		panic(p)
	}
}
