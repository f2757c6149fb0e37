package mercure

import "errors"

// Errors returned by [New], [Hub.Publish] and the handlers. Errors about an
// update wrap one of these; test them with [errors.Is].
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

	// ErrNoTopic: an update needs at least one topic (spec §Publication).
	ErrNoTopic = errors.New("mercure: update has no topic")
	// ErrInvalidTopic: a topic is not valid UTF-8 or holds control or
	// format characters (spec §Terminology, §Publication).
	ErrInvalidTopic = errors.New("mercure: invalid topic")
	// ErrWildcardTopic: "*" is a matcher, never a topic (spec §Publication).
	ErrWildcardTopic = errors.New("mercure: topic * cannot be published")
	// ErrReservedTopic: the topic lies in the hub's own namespace (spec
	// §Publication).
	ErrReservedTopic = errors.New("mercure: topic is in the hub's reserved namespace")
	// ErrInvalidID: the id holds control or format characters, starts with
	// "#" or is "earliest" (spec §Publication).
	ErrInvalidID = errors.New("mercure: invalid update id")
	// ErrInvalidType: the type holds control or format characters or is
	// "mercure", which only the hub may send (spec §Publication, §Security
	// Considerations: Reserved Hub Namespace).
	ErrInvalidType = errors.New("mercure: invalid update type")
	// ErrInvalidRetry: retry is not a non-negative number of milliseconds
	// (spec §Publication).
	ErrInvalidRetry = errors.New("mercure: invalid retry")
	// ErrInvalidData: data is not valid UTF-8 (spec §Publication).
	ErrInvalidData = errors.New("mercure: data is not valid UTF-8")
	// ErrTooLarge: the update is over a size limit of [Limits]: more than
	// MaxTopics topics, a topic, id or type longer than MaxFieldBytes, or
	// data longer than MaxBodyBytes. [Hub.Publish] applies the limits of
	// the HTTP endpoint, which answers 413.
	ErrTooLarge = errors.New("mercure: update too large")

	// ErrStore is wrapped, with the store's own error, by errors from
	// [Hub.Publish] when the store did not acknowledge the update (the
	// HTTP endpoint then answers 503; a store on the network may have
	// recorded it nonetheless, when only its reply was lost), and from
	// [Hub.Subscriptions] when the store could not list them.
	ErrStore = errors.New("mercure: store failed")

	// ErrPrivateUnreadable: the update is private, and the hub authorizes
	// no subscriber (neither [WithIssuer] nor [WithAuthorizer]), so no
	// stream could ever receive it. The HTTP endpoint answers 400.
	ErrPrivateUnreadable = errors.New("mercure: private update on a hub that authorizes no subscriber")

	// ErrHubClosed is the one error of a hub shutting down: [Hub.Live]
	// and [Hub.Ready] report it from the start of [Hub.Shutdown], so that
	// load balancers stop sending clients, and [Hub.Publish] returns it
	// once the hub no longer delivers, which with [WithDrain] is after
	// the drain (the hub delivers meanwhile).
	ErrHubClosed = errors.New("mercure: the hub is shutting down")

	// ErrShuttingDown is ErrHubClosed, the same value under the name
	// that [Hub.Live] and [Hub.Ready] once reported: errors.Is with
	// either name tests the same condition.
	//
	// Deprecated: use [ErrHubClosed].
	ErrShuttingDown = ErrHubClosed

	// ErrInvalidToken is wrapped by the error [Hub.SetCookie] returns
	// when the token is not a JWT with an expiry, which the cookie's
	// needs; nothing is set then.
	ErrInvalidToken = errors.New("mercure: invalid token")

	// ErrInsecureCookie is returned by [Hub.SetCookie] when the hub URL
	// is plain http:// on a host other than localhost: browsers drop the
	// Secure cookie it would set, silently, and the streams it was meant
	// for would be refused.
	ErrInsecureCookie = errors.New("mercure: browsers drop a Secure cookie on http:// except on localhost")
)
