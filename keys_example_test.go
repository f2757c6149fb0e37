package mercure_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/mercurekit/mercure"
)

// ExampleKeys gives the hub the public key of the application's signing
// key, as PEM read from a file or an environment variable. A private key
// is refused: the hub only verifies.
func ExampleKeys() {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		log.Fatal(err)
	}
	publicPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})

	keys, err := mercure.Keys(mercure.PEM(publicPEM))
	if err != nil {
		log.Fatal(err)
	}
	hub, err := mercure.New(
		"https://example.com/.well-known/mercure",
		mercure.WithIssuer(mercure.Issuer{ID: "https://example.com", SubscriberKeys: keys}),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())
	fmt.Println(keys.Len(), "key")

	_, err = mercure.Keys(priv)
	fmt.Println(errors.Is(err, mercure.ErrInvalidKey))
	// Output:
	// 1 key
	// true
}

// ExampleNewSigner signs with an Ed25519 private key read as PEM; the hub
// verifies with its public key, and accepts the tokens.
func ExampleNewSigner() {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		log.Fatal(err)
	}
	privatePEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})

	keys, err := mercure.Keys(pub)
	if err != nil {
		log.Fatal(err)
	}
	hub, err := mercure.New(
		"https://example.com/.well-known/mercure",
		mercure.WithIssuer(mercure.Issuer{ID: "https://example.com", SubscriberKeys: keys}),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())
	signer, err := mercure.NewSigner(mercure.PEM(privatePEM), "https://example.com", hub.URL())
	if err != nil {
		log.Fatal(err)
	}
	tok, err := signer.Token(mercure.Grant{Subject: "alice",
		Subscribe: []mercure.Match{{Pattern: "https://example.com/users/alice/{*}?", Type: mercure.MatchURLPattern}}})
	if err != nil {
		log.Fatal(err)
	}

	// A stream opened with the token.
	srv := httptest.NewServer(hub)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+hub.Path()+"?match=*", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	fmt.Println(res.Status)

	// The public key cannot sign.
	_, err = mercure.NewSigner(pub, "https://example.com", hub.URL())
	fmt.Println(errors.Is(err, mercure.ErrInvalidKey))
	// Output:
	// 200 OK
	// true
}

// ExampleHMACSecret shares one secret between the signer and the hub. The
// hub needs at least 32 bytes: shorter secrets fail at once.
func ExampleHMACSecret() {
	secret := mercure.HMACSecret("a secret of 32 bytes or more, random!")
	keys, err := mercure.Keys(secret)
	if err != nil {
		log.Fatal(err)
	}
	hub, err := mercure.New(
		"https://example.com/.well-known/mercure",
		mercure.WithIssuer(mercure.Issuer{ID: "https://example.com", PublisherKeys: keys}),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer hub.Shutdown(context.Background())
	signer, err := mercure.NewSigner(secret, "https://example.com", hub.URL())
	fmt.Println(signer != nil, err)

	_, err = mercure.NewSigner(mercure.HMACSecret("too short"), "https://example.com", hub.URL())
	fmt.Println(err)
	// Output:
	// true <nil>
	// mercure: invalid key: HMAC secret of 9 bytes; the hub needs at least 32
}
