package dashboard

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// denied is the whole answer to a request without the job's token.
const denied = "monarch: this dashboard needs its job's token: monarch dashboard JOB prints its address with it\n"

// access lets through the requests that show the job's token (see the
// package doc) and refuses the others.
func (s *Server) access(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Has("token") {
			if !s.valid(q.Get("token")) {
				deny(w)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: s.o.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q.Del("token")
			to := *r.URL
			to.RawQuery = q.Encode()
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("Referrer-Policy", "no-referrer")
			http.Redirect(w, r, to.RequestURI(), http.StatusSeeOther)
			return
		}
		if c, err := r.Cookie(s.cookie); err == nil && s.valid(c.Value) {
			next.ServeHTTP(w, r)
			return
		}
		if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") && s.valid(strings.TrimSpace(tok)) {
			next.ServeHTTP(w, r)
			return
		}
		deny(w)
	})
}

// valid reports whether tok is the job's token, in a time that does not
// depend on where they differ, nor on tok's length.
func (s *Server) valid(tok string) bool {
	a, b := sha256.Sum256([]byte(tok)), sha256.Sum256([]byte(s.o.Token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

func deny(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("WWW-Authenticate", `Bearer realm="monarch dashboard"`)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	w.Write([]byte(denied))
}
