package mercure

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/google/uuid"
)

// WithInsecurePlayground serves the debugger (see [WithDebugger]) and hands
// its page a token that publishes and subscribes to every topic, private
// updates included, so that a developer can try the hub without minting
// tokens.
//
// DANGER: for local development only. Any client that reaches the hub
// gets that token for the asking; [New] logs a warning when it is on. The
// tokens are minted with a key the hub generates and never shows, valid
// on this hub for 10 minutes, handed only to requests for the hub URL's
// own host and origin. Subscribers without a token then need
// [WithAnonymousSubscribers], as with [WithIssuer].
func WithInsecurePlayground() Option {
	return func(c *config) error {
		if c.playground != nil {
			return nil
		}
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return fmt.Errorf("%w: playground key: %v", ErrInvalidOption, err)
		}
		keys, err := Keys(pub)
		if err != nil {
			return fmt.Errorf("%w: playground key: %w", ErrInvalidOption, err)
		}
		// A fresh issuer id: no configured issuer can share it.
		iss := Issuer{ID: "urn:uuid:" + uuid.NewString(), PublisherKeys: keys, SubscriberKeys: keys}
		signer, err := NewSigner(priv, iss.ID, c.url.String())
		if err != nil {
			return err
		}
		c.issuers = append(c.issuers, iss)
		c.playground = signer
		c.debugger = true
		return nil
	}
}

// playgroundTTL is the lifetime of the playground's tokens.
const playgroundTTL = 10 * time.Minute

// checkPlayground refuses a token policy that would refuse the
// playground's tokens.
func (c *config) checkPlayground() error {
	if c.playground == nil || len(c.tokenPolicy.Algorithms) == 0 || slices.Contains(c.tokenPolicy.Algorithms, "EdDSA") {
		return nil
	}
	return fmt.Errorf("%w: the playground signs its tokens with EdDSA, which TokenPolicy.Algorithms leaves out", ErrInvalidOption)
}

// servePlaygroundToken hands out a playground token (POST); 404 without
// the playground.
func (h *Hub) servePlaygroundToken(w http.ResponseWriter, r *http.Request) {
	signer := h.cfg.playground
	if signer == nil {
		writeProblem(w, http.StatusNotFound, "no such page in the debugger")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeProblem(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	hubHost := h.cfg.url
	if origin(&url.URL{Scheme: hubHost.Scheme, Host: r.Host}) != origin(hubHost) {
		writeProblem(w, http.StatusForbidden, "the playground hands out tokens only to requests for the hub URL's host, "+
			quote(hubHost.Host)+", not "+quote(r.Host)+": open the page at "+h.url+"/debug/")
		return
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		writeProblem(w, http.StatusForbidden, "the playground hands out tokens to pages of the hub's own origin only")
		return
	}
	all := []Match{{Pattern: "*"}}
	tok, err := signer.Token(Grant{Subject: "playground", Publish: all, Subscribe: all, TTL: playgroundTTL})
	if err != nil {
		h.log.Error("mercure: the playground cannot mint a token", "error", err)
		writeProblem(w, http.StatusInternalServerError, "the playground cannot mint a token")
		return
	}
	b, _ := json.Marshal(struct {
		Token     string `json:"token"`
		ExpiresIn int    `json:"expires_in"` // seconds, as in OAuth 2.0 token responses
	}{tok, int(playgroundTTL / time.Second)})
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Cache-Control", "no-store")
	w.Write(b)
}
