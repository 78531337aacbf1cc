package gateway

import "net/http"

// HeaderSession names a buyer's conversation, for affinity, when the body's user does not.
const HeaderSession = "X-Session-Id"

// session names the buyer's session of a request, for affinity (core.Request.Session): the
// X-Session-Id header, or else the body's user; "" when neither is given.
func session(r *http.Request, user string) string {
	if s := r.Header.Get(HeaderSession); s != "" {
		return s
	}
	return user
}
