package gateway

// aside runs fn on a goroutine of its own and waits for it. The deep calls of matching a node
// and of writing to the database grow that goroutine's stack, which is freed when fn returns,
// rather than the stack of the request's goroutine, which an answer held open keeps for as
// long as it lasts: a stream then holds an 8 KiB stack instead of 16 or 32. A panic in fn is
// raised again in the caller, as if fn had run there.
func aside(fn func()) {
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		fn()
	}()
	if p := <-done; p != nil {
		panic(p)
	}
}
