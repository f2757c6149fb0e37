package mercure

import (
	"net/http"
)

// principal is what an access token proves about a request: the rights
// the hub acts on. A nil *principal is an anonymous client, which may read
// public updates only (AUTH-2, AUTH-36) and publish nothing.
//
// Token validation (AUTH-19 to AUTH-33) fills it in; the handlers only ask
// the questions below, so the validator plugs in here without reshaping
// them.
type principal struct {
	publish   []grant
	subscribe []grant
}

// grant is one right of a principal over the topics a matcher selects.
type grant struct{ m matcher }

// mayPublish reports whether p may publish an update with these topics:
// it needs publish on every one of them (AUTH-34).
func (p *principal) mayPublish(topics []string) bool {
	if p == nil {
		return false
	}
	for _, t := range topics {
		if !anyGrantMatches(p.publish, t) {
			return false
		}
	}
	return true
}

// mayRead reports whether p may receive the private event e: it needs
// subscribe on at least one of its topics, canonical or alternate
// (AUTH-35). Routing plays no part (AUTH-8).
func (p *principal) mayRead(e *Event) bool {
	if p == nil {
		return false
	}
	for _, t := range e.Topics {
		if anyGrantMatches(p.subscribe, t) {
			return true
		}
	}
	return false
}

func anyGrantMatches(grants []grant, topic string) bool {
	for _, g := range grants {
		if g.m.matches(topic) {
			return true
		}
	}
	return false
}

// authenticate returns the principal of the request's access token, nil
// for a request that presents none. When it returns ok == false it has
// already answered the request (400 invalid_request or 401 invalid_token).
//
// The hub does not validate access tokens yet: every request is anonymous,
// so HTTP publishing works only with [WithInsecurePublishing].
func (h *Hub) authenticate(w http.ResponseWriter, r *http.Request) (p *principal, ok bool) {
	return nil, true
}

// challenge answers with status and a Bearer challenge (RFC 6750): no
// error attribute when no token was presented (AUTH-13), the OAuth error
// code otherwise (AUTH-14, AUTH-15).
func (h *Hub) challenge(w http.ResponseWriter, status int, code string) {
	c := "Bearer"
	if code != "" {
		c += ` error="` + code + `"`
	}
	w.Header().Set("WWW-Authenticate", c)
	writeProblem(w, status, http.StatusText(status))
}
