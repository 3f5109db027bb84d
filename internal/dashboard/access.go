package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
)

// denied is the whole answer to a request without the job's token.
const denied = "monarch: this dashboard needs its job's token: monarch dashboard JOB prints its address with it\n"

// A browser sends a host's cookies to every port of that host, and
// SameSite counts another port of the same host as the same site: a
// cookie of Path=/ would reach the server of any user who listens on
// another port of the job's host and gets the browser to open it. So
// the page lives under a random prefix (its URL's path, which only holds
// of the token learn), and its cookie is scoped to that path: the browser
// sends it to no other path, on no port. Its value is derived from the
// token and the port (an HMAC), never the token itself, so that a cookie
// that leaks anyway opens this dashboard's pages and nothing the token
// opens elsewhere. Programs show the token itself (Bearer), on any path.

// newPrefix is a dashboard's random path prefix, "/" and 32 hex digits.
func newPrefix() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("dashboard: path prefix: %w", err)
	}
	return "/" + hex.EncodeToString(b), nil
}

// session is the cookie's value for token on port.
func session(token, port string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("monarch dashboard session, port " + port))
	return hex.EncodeToString(m.Sum(nil))
}

// access lets through the requests that show the job's token (see the
// package doc) and refuses the others. Under the prefix, the request
// reaches next without it.
func (s *Server) access(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, under := s.underPrefix(r.URL.Path)
		q := r.URL.Query()
		if q.Has("token") {
			if !equal(q.Get("token"), s.o.Token) {
				deny(w)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: s.session, Path: s.prefix + "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q.Del("token")
			if !under {
				rest = r.URL.Path // a link of another form: the same page
			}
			to := *r.URL
			to.Path, to.RawPath = s.prefix+rest, ""
			if rest == "" {
				to.Path += "/"
			}
			to.RawQuery = q.Encode()
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("Referrer-Policy", "no-referrer")
			http.Redirect(w, r, to.RequestURI(), http.StatusSeeOther)
			return
		}
		bearer := false
		if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
			bearer = equal(strings.TrimSpace(tok), s.o.Token)
		}
		if !under {
			// Outside the prefix the cookie is never sent: programs only.
			if !bearer {
				deny(w)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if !bearer {
			if c, err := r.Cookie(s.cookie); err != nil || !equal(c.Value, s.session) {
				deny(w)
				return
			}
		}
		if rest == "" {
			http.Redirect(w, r, s.prefix+"/", http.StatusSeeOther)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path, r2.URL.RawPath = rest, ""
		next.ServeHTTP(w, r2)
	})
}

// underPrefix tells whether path is the prefix or under it, and what
// follows it ("" for the prefix alone), comparing the prefix in constant
// time: it is as secret as the token.
func (s *Server) underPrefix(path string) (rest string, under bool) {
	if len(path) < len(s.prefix) || subtle.ConstantTimeCompare([]byte(path[:len(s.prefix)]), []byte(s.prefix)) != 1 {
		return "", false
	}
	rest = path[len(s.prefix):]
	if rest != "" && rest[0] != '/' {
		return "", false
	}
	return rest, true
}

// equal reports whether a is b, in a time that does not depend on where
// they differ, nor on a's length.
func equal(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

func deny(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("WWW-Authenticate", `Bearer realm="monarch dashboard"`)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	w.Write([]byte(denied))
}
