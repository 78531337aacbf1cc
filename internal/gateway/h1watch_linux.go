package gateway

import (
	"net"
	"sync"
	"syscall"
)

// On Linux the HTTP/1.1 streams' connections are watched by one goroutine, in an epoll set of
// their own, rather than by a goroutine each blocked in a read: an open stream then costs one
// goroutine, its request's, as over HTTP/2. When a connection becomes readable (the buyer
// closed it, or sent bytes) its watch starts, and reads what came as before.

// polled is what h1Stream keeps of its place in the poller.
type polled struct {
	id uint64          // its key in the poller; 0: not polled
	rc syscall.RawConn // its connection's file descriptor
}

// startWatch watches the stream's connection: with the poller, or else with watch on a
// goroutine of its own.
func (s *h1Stream) startWatch() {
	if !streamPoller.add(s) {
		go s.watch()
	}
}

// stopPolling takes the stream's connection out of the poller, if it is in it, and reports
// whether it was: false when it is not, or when the poller has started its watch already.
func (s *h1Stream) stopPolling() bool { return streamPoller.remove(s) }

// streamPoller is the process's poller of HTTP/1.1 streams' connections.
var streamPoller poller

// A poller is an epoll set, level-triggered and one-shot, of the connections of streams, and
// the goroutine that waits on it.
type poller struct {
	once   sync.Once
	fd     int  // the epoll set's
	broken bool // it could not be made, or waiting on it failed: streams watch on their own

	mu      sync.Mutex
	next    uint64
	streams map[uint64]*h1Stream
}

// add puts s's connection in the poller; false when it cannot, and s watches on its own.
func (p *poller) add(s *h1Stream) bool {
	p.once.Do(p.start)
	conn := s.conn
	for {
		// A TLS connection, or a wrapper of a connection that tells it as tls.Conn does.
		u, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		conn = u.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.broken {
		return false
	}
	p.next++
	id := p.next
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT, Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
	var cerr error
	if err := rc.Control(func(fd uintptr) { cerr = syscall.EpollCtl(p.fd, syscall.EPOLL_CTL_ADD, int(fd), &ev) }); err != nil || cerr != nil {
		return false
	}
	s.polled = polled{id: id, rc: rc}
	p.streams[id] = s
	return true
}

// remove takes s's connection out of the poller, and reports whether it was in it.
func (p *poller) remove(s *h1Stream) bool {
	if s.polled.id == 0 {
		return false
	}
	p.mu.Lock()
	_, ok := p.streams[s.polled.id]
	delete(p.streams, s.polled.id)
	p.mu.Unlock()
	if ok {
		s.polled.rc.Control(func(fd uintptr) { syscall.EpollCtl(p.fd, syscall.EPOLL_CTL_DEL, int(fd), nil) })
	}
	return ok
}

// watchPolled runs the watch of a stream whose connection left the poller readable: it takes it
// out of the epoll set, where it stays (disabled) until then.
func (s *h1Stream) watchPolled() {
	s.polled.rc.Control(func(fd uintptr) { syscall.EpollCtl(streamPoller.fd, syscall.EPOLL_CTL_DEL, int(fd), nil) })
	s.watch()
}

// start makes the epoll set and the goroutine that waits on it.
func (p *poller) start() {
	p.streams = make(map[uint64]*h1Stream)
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		p.broken = true
		return
	}
	p.fd = fd
	go p.run()
}

// run waits for the connections in the set: each that becomes readable leaves the set (it is
// one-shot) and starts its stream's watch.
func (p *poller) run() {
	var evs [128]syscall.EpollEvent
	for {
		n, err := syscall.EpollWait(p.fd, evs[:], -1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			// Never seen; should it happen, no stream may lose its watch.
			p.mu.Lock()
			p.broken = true
			streams := p.streams
			p.streams = map[uint64]*h1Stream{}
			p.mu.Unlock()
			for _, s := range streams {
				go s.watchPolled()
			}
			return
		}
		p.mu.Lock()
		for _, ev := range evs[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if s, ok := p.streams[id]; ok {
				delete(p.streams, id)
				go s.watchPolled()
			}
		}
		p.mu.Unlock()
	}
}
