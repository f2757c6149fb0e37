package mercure

import (
	"fmt"
	"slices"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/mercurekit/mercure/internal/chars"
	"github.com/mercurekit/mercure/internal/index"
	"github.com/mercurekit/mercure/internal/uritemplate"
)

// The compatibility mode (spec §Changes from Pre-Standardization
// Deployments). Applications that publish from PHP with Symfony's Mercure
// component (MercureBundle, API Platform) and browsers on EventSource
// polyfills speak the drafts that came before the standard. With
// [WithLegacyClients] the hub also accepts what they send; everything
// else behaves as without it. docs/migration.md says how to move such an
// application to the standard, and what the mode does not carry.

// LegacyCookieName is the cookie in which pre-standard clients present
// their token; in the compatibility mode the hub reads it beside the
// configured one (see [WithCookieName]).
const LegacyCookieName = "mercureAuthorization"

// MatchURITemplate is the matcher type of the pre-standard drafts' URI
// template selectors (RFC 6570), which subscribers send as topic=
// parameters and tokens hold in their mercure claim, in the compatibility
// mode only. It appears in the subscription documents of such
// subscriptions (see [Subscription]).
const MatchURITemplate = "uritemplate"

// legacyOption names the option that accepts pre-standard clients, for
// the descriptions of refusals.
const legacyOption = "WithLegacyClients (the standalone hub: -legacy-clients)"

// LegacyClients configures the compatibility mode (see [WithLegacyClients]).
type LegacyClients struct {
	// PublisherKeys and SubscriberKeys verify the pre-standard tokens of
	// publishers and subscribers. Such a token names no audience, so each
	// key must belong to this hub alone: a key that also signs tokens for
	// another service lets that service's tokens in. Either may be nil, in
	// which case no pre-standard token of that role is accepted. [Keys]
	// builds them from an HMAC secret, as Symfony's MERCURE_JWT_SECRET is,
	// or from public keys.
	PublisherKeys, SubscriberKeys jwk.Set
	// Issuers lists the iss values a pre-standard token may carry: one
	// that carries another is refused; one that carries none is accepted.
	Issuers []string
}

// WithLegacyClients turns on the compatibility mode for the clients of
// the drafts before the standard, such as Symfony's Mercure component and
// EventSource polyfills; [New] logs a warning when it is on. The hub then
// also accepts tokens with the legacy mercure claim, verified with the
// keys of lc only; topic= subscribe parameters with the drafts' selectors
// ("*", exact topics, URI templates: [MatchURITemplate], held to the
// same [PatternLimits]); the [LegacyCookieName] cookie; and the token in
// the authorization query parameter (keep query strings out of access
// logs). docs/migration.md is the guide to moving such an application.
func WithLegacyClients(lc LegacyClients) Option {
	return func(c *config) error {
		for _, set := range []jwk.Set{lc.PublisherKeys, lc.SubscriberKeys} {
			if err := checkIssuerKeys(set); err != nil {
				return fmt.Errorf("%w: legacy clients: %w", ErrInvalidOption, err)
			}
		}
		lc.Issuers = slices.Clone(lc.Issuers)
		c.legacy = &lc
		return nil
	}
}

// resumeAliases are the query parameters that older clients send the last
// event id in, in the order they are read when several are present:
// lastEventID (the drafts since 2020), lastEventId
// (event-source-polyfill's default lastEventIdQueryParameterName) and
// Last-Event-ID (the drafts before). last_event_id and the Last-Event-ID
// header take precedence over all of them.
var resumeAliases = [...]string{"lastEventID", "lastEventId", "Last-Event-ID"}

// legacySelector builds the matcher of a topic= parameter in the
// compatibility mode, as the drafts read a selector: "*" for every topic,
// a URI template for its expansions, anything else as an exact topic. A
// template's estimated cost is checked against lim and returned; it is
// compiled by [Hub.compileMatchers].
func (h *Hub) legacySelector(value string, lim *PatternLimits) (matcher, index.Cost, error) {
	switch {
	case value == "":
		return matcher{}, index.Cost{}, fmt.Errorf("%w: empty topic", errMatcher)
	case len(value) > h.cfg.limits.MaxMatcherBytes:
		return matcher{}, index.Cost{}, fmt.Errorf("%w: topic longer than %d bytes", errMatcher, h.cfg.limits.MaxMatcherBytes)
	case !chars.Valid(value):
		return matcher{}, index.Cost{}, fmt.Errorf("%w: topic %q holds invalid UTF-8, control or format characters", errMatcher, value)
	case value == "*":
		return matcher{kind: index.Wildcard, typ: MatchExact, value: value}, index.Cost{}, nil
	case !uritemplate.IsTemplate(value):
		return matcher{kind: index.Exact, typ: MatchExact, value: value}, index.Cost{}, nil
	}
	cost := index.EstimateTemplateCost(value)
	if err := lim.limit().Check(value, cost); err != nil {
		return matcher{}, index.Cost{}, fmt.Errorf("%w: %w", errMatcher, err)
	}
	return matcher{kind: index.URITemplate, typ: MatchURITemplate, value: value}, cost, nil
}

// compileTemplate is [Hub.compilePattern] for a URI template.
func (h *Hub) compileTemplate(raw string, lim *PatternLimits) (*index.Pattern, error) {
	return h.auth.patterns.GetTemplate(raw, lim.limit())
}
