package mercure

import (
	"context"

	"github.com/mercurekit/mercure/internal/authserver"
)

// The authorization-server client (metadata discovery, JWK cache, the
// private-address guard) lives in internal/authserver; these adapt it to
// the hub's configuration.

// authServers fetches and keeps fresh the keys of the hub's authorization
// server issuers.
type authServers struct{ s *authserver.Servers }

func newAuthServers(cfg *config) (*authServers, error) {
	s, err := authserver.New(authserver.Config{
		Client:       cfg.httpClient,
		AllowPrivate: cfg.privateFetches,
		RefreshLimit: cfg.keyRefreshLimit,
		Logger:       cfg.logger,
	})
	if err != nil {
		return nil, err
	}
	return &authServers{s}, nil
}

func (as *authServers) add(iss string) (*authserver.Keys, error) { return as.s.Add(iss) }
func (as *authServers) start(ctx context.Context) error          { return as.s.Start(ctx) }
func (as *authServers) shutdown(ctx context.Context) error       { return as.s.Shutdown(ctx) }

// asMetadataURL returns where the RFC 8414 metadata of the authorization
// server iss lies, or why iss is not an authorization server's issuer.
func asMetadataURL(iss string) (string, error) { return authserver.MetadataURL(iss) }
