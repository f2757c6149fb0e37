package mercure

import "errors"

// Errors returned by the hub's functions and methods, wrapped with what
// went wrong; test them with [errors.Is].
var (
	// ErrInvalidOption is wrapped by errors from [New] about a bad option,
	// and by those from [NewSigner] about its issuer or audience.
	ErrInvalidOption = errors.New("mercure: invalid option")

	// ErrInvalidKey is wrapped by errors from [Keys] and [NewSigner] about
	// key material that cannot serve: an unsupported or weak key, an HMAC
	// secret under 32 bytes, a public key given to sign or a private key
	// given to verify. [New] wraps it too, with [ErrInvalidOption], when an
	// [Issuer]'s key set holds a private key.
	ErrInvalidKey = errors.New("mercure: invalid key")

	// ErrInvalidGrant is wrapped by errors from [Signer.Token] about a
	// [Grant] that a hub would refuse: a bad match, type, payload or TTL,
	// or more or longer matches than a hub's default [Limits] allow.
	ErrInvalidGrant = errors.New("mercure: invalid grant")

	// ErrInvalidUpdate is wrapped by errors about an update the hub
	// refuses (spec §Publication), over HTTP with 400, saying why: no
	// topic; a topic, id or type with control or format characters, or
	// data that is not UTF-8; the topic "*", or one in the hub's reserved
	// namespace; an id "earliest" or starting with "#"; the type
	// "mercure"; a negative retry; a private update on a hub that
	// authorizes no subscriber.
	ErrInvalidUpdate = errors.New("mercure: invalid update")

	// ErrTooLarge is wrapped by errors about an update over a size limit
	// of [Limits] (MaxTopics, MaxFieldBytes, MaxBodyBytes); over HTTP,
	// 413. [Hub.Publish] applies the limits of the HTTP endpoint.
	ErrTooLarge = errors.New("mercure: update too large")

	// ErrStore is wrapped, with the store's own error, by errors from
	// [Hub.Publish] when the store did not acknowledge the update (over
	// HTTP, 503; a store on the network may have recorded it
	// nonetheless, when only its reply was lost), and from
	// [Hub.Subscriptions] and [Hub.EndStreams] when the store failed.
	ErrStore = errors.New("mercure: store failed")

	// ErrHubClosed is the error of a hub shutting down: [Hub.Live] and
	// [Hub.Ready] report it from the start of [Hub.Shutdown], so that load
	// balancers stop sending clients, and [Hub.Publish] returns it once
	// the hub no longer delivers (after the drain, with [Limits].Drain).
	ErrHubClosed = errors.New("mercure: the hub is shutting down")

	// ErrInvalidToken is wrapped by the error [Hub.SetCookie] returns
	// when the token is not a JWT with an expiry, which the cookie needs;
	// nothing is set then.
	ErrInvalidToken = errors.New("mercure: invalid token")

	// ErrInsecureCookie is returned by [Hub.SetCookie] when the hub URL
	// is plain http:// on a host other than localhost: browsers would
	// drop the Secure cookie it sets, silently.
	ErrInsecureCookie = errors.New("mercure: browsers drop a Secure cookie on http:// except on localhost")

	// ErrEmptyFilter is returned by [Hub.EndStreams] for a [StreamFilter]
	// that names neither a subject nor a session.
	ErrEmptyFilter = errors.New("mercure: a stream filter names no subject and no session")
)
