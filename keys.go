package mercure

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/mercurekit/mercure/internal/token"
)

// HMACSecret is a shared secret of at least 32 bytes, for the HS256
// algorithm. Give it to [Keys] for the hub and to [NewSigner] for the
// application: both must hold the same secret.
type HMACSecret []byte

// PEM is PEM-encoded key material, as written by openssl and most key
// management tools: "PUBLIC KEY", "RSA PUBLIC KEY" and "CERTIFICATE"
// blocks for [Keys]; a "PRIVATE KEY", "EC PRIVATE KEY" or
// "RSA PRIVATE KEY" block for [NewSigner]. Encrypted private keys are not
// read: decrypt them first.
type PEM []byte

// Keys returns the key set that verifies the signatures of an [Issuer]'s
// access tokens (spec §Authorization), for its PublisherKeys or
// SubscriberKeys. Each argument is a public key (*ecdsa.PublicKey P-256,
// P-384 or P-521; *rsa.PublicKey of 2048 bits or more;
// ed25519.PublicKey), an *x509.Certificate, [PEM], an [HMACSecret] of at
// least 32 bytes, or a jwk.Key; at most 16, as while a key is rotated.
// Plain []byte and strings are refused, so that a PEM file is never taken
// for a secret, and so is a private key, which verification keys should
// never hold: pass its public part. Errors wrap [ErrInvalidKey].
func Keys(keys ...any) (jwk.Set, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: Keys needs at least one key", ErrInvalidKey)
	}
	set := jwk.NewSet()
	add := func(raw any) error {
		if err := checkKey(raw, false); err != nil {
			return err
		}
		k, err := jwk.Import(raw)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidKey, err)
		}
		return set.AddKey(k)
	}
	for i, key := range keys {
		var err error
		switch k := key.(type) {
		case PEM:
			var blocks []pemKey
			if blocks, err = parsePEM(k); err == nil {
				for _, b := range blocks {
					if b.private {
						err = fmt.Errorf("%w: PEM block %q holds a private key, which only a Signer needs: give the hub the public key or certificate", ErrInvalidKey, b.typ)
						break
					}
					if err = add(b.raw); err != nil {
						break
					}
				}
			}
		case *x509.Certificate:
			if k == nil {
				err = fmt.Errorf("%w: nil certificate", ErrInvalidKey)
			} else {
				err = add(k.PublicKey)
			}
		case jwk.Key:
			var raw any
			if err = jwk.Export(k, &raw); err != nil {
				err = fmt.Errorf("%w: %v", ErrInvalidKey, err)
			} else if err = checkKey(raw, false); err == nil {
				err = set.AddKey(k)
			}
		case HMACSecret:
			err = add([]byte(k))
		case []byte:
			err = errAmbiguousBytes
		default:
			err = add(key)
		}
		if err != nil {
			return nil, fmt.Errorf("%w (argument %d of Keys)", err, i)
		}
	}
	if set.Len() > token.MaxKeysPerSet {
		return nil, fmt.Errorf("%w: %d keys, at most %d", ErrInvalidKey, set.Len(), token.MaxKeysPerSet)
	}
	return set, nil
}

// errAmbiguousBytes refuses plain bytes, which could be a secret or the
// contents of a PEM file: taking a PEM file for a secret would sign with
// text that is no secret.
var errAmbiguousBytes = fmt.Errorf("%w: plain bytes are ambiguous: convert them to mercure.HMACSecret or mercure.PEM", ErrInvalidKey)

// signingKey turns the key material given to NewSigner into a private
// JWK, refusing what cannot sign tokens a hub accepts.
func signingKey(key any) (jwk.Key, error) {
	var raw any
	switch k := key.(type) {
	case jwk.Key:
		if err := jwk.Export(k, &raw); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidKey, err)
		}
		if err := checkKey(raw, true); err != nil {
			return nil, err
		}
		return k, nil
	case PEM:
		blocks, err := parsePEM(k)
		if err != nil {
			return nil, err
		}
		for _, b := range blocks {
			if !b.private {
				continue // the certificate of a key and certificate bundle
			}
			if raw != nil {
				return nil, fmt.Errorf("%w: PEM holds more than one private key", ErrInvalidKey)
			}
			raw = b.raw
		}
		if raw == nil {
			return nil, fmt.Errorf("%w: PEM holds no private key: a public key or certificate cannot sign; it goes to the hub, through Keys", ErrInvalidKey)
		}
	case HMACSecret:
		raw = []byte(k)
	case []byte:
		return nil, errAmbiguousBytes
	default:
		raw = key
	}
	if err := checkKey(raw, true); err != nil {
		return nil, err
	}
	k, err := jwk.Import(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidKey, err)
	}
	return k, nil
}

// checkKey checks that raw, an exported key, is one the hub accepts, and
// a private key (or a secret) when signing, a public key (or a secret)
// otherwise.
func checkKey(raw any, signing bool) error {
	private := false
	switch k := raw.(type) {
	case nil:
		return fmt.Errorf("%w: no key", ErrInvalidKey)
	case *ecdsa.PrivateKey:
		if k == nil {
			return fmt.Errorf("%w: nil key", ErrInvalidKey)
		}
		private = true
		if err := checkCurve(&k.PublicKey); err != nil {
			return err
		}
	case *ecdsa.PublicKey:
		if k == nil {
			return fmt.Errorf("%w: nil key", ErrInvalidKey)
		}
		if err := checkCurve(k); err != nil {
			return err
		}
	case *rsa.PrivateKey:
		if k == nil {
			return fmt.Errorf("%w: nil key", ErrInvalidKey)
		}
		private = true
		if err := checkRSA(&k.PublicKey); err != nil {
			return err
		}
	case *rsa.PublicKey:
		if k == nil {
			return fmt.Errorf("%w: nil key", ErrInvalidKey)
		}
		if err := checkRSA(k); err != nil {
			return err
		}
	case ed25519.PrivateKey:
		private = true
		if len(k) != ed25519.PrivateKeySize {
			return fmt.Errorf("%w: Ed25519 private key of %d bytes", ErrInvalidKey, len(k))
		}
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return fmt.Errorf("%w: Ed25519 public key of %d bytes", ErrInvalidKey, len(k))
		}
	case []byte:
		// An HMAC secret: from an HMACSecret, or exported from an oct JWK.
		if len(k) < token.MinHMACBytes {
			return fmt.Errorf("%w: HMAC secret of %d bytes; the hub needs at least %d", ErrInvalidKey, len(k), token.MinHMACBytes)
		}
		return nil
	case string:
		return fmt.Errorf("%w: a string is not key material: convert it to mercure.HMACSecret or mercure.PEM", ErrInvalidKey)
	default:
		return fmt.Errorf("%w: unsupported key type %T", ErrInvalidKey, raw)
	}
	switch {
	case signing && !private:
		return fmt.Errorf("%w: a public key cannot sign tokens: the signer needs the private key, the hub its public key", ErrInvalidKey)
	case !signing && private:
		return fmt.Errorf("%w: a private key given to verify tokens: give the hub its public key (priv.Public()), and keep the private key to the signer", ErrInvalidKey)
	}
	return nil
}

func checkCurve(k *ecdsa.PublicKey) error {
	if k.Curve == nil {
		return fmt.Errorf("%w: ECDSA key without a curve", ErrInvalidKey)
	}
	switch name := k.Curve.Params().Name; name {
	case "P-256", "P-384", "P-521":
		return nil
	default:
		return fmt.Errorf("%w: ECDSA curve %s; the hub accepts P-256, P-384 and P-521", ErrInvalidKey, name)
	}
}

func checkRSA(k *rsa.PublicKey) error {
	if k.N == nil || k.N.BitLen() < token.MinRSABits {
		bits := 0
		if k.N != nil {
			bits = k.N.BitLen()
		}
		return fmt.Errorf("%w: RSA key of %d bits; the hub needs at least %d", ErrInvalidKey, bits, token.MinRSABits)
	}
	return nil
}

// pemKey is one key read from a PEM block.
type pemKey struct {
	typ     string // the block type
	raw     any
	private bool
}

// parsePEM reads every block of b; it refuses a block that holds no key
// and input without any block.
func parsePEM(b []byte) ([]pemKey, error) {
	var keys []pemKey
	for {
		block, rest := pem.Decode(b)
		if block == nil {
			break
		}
		b = rest
		k := pemKey{typ: block.Type}
		var err error
		switch block.Type {
		case "PUBLIC KEY":
			k.raw, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			k.raw, err = x509.ParsePKCS1PublicKey(block.Bytes)
		case "CERTIFICATE":
			var cert *x509.Certificate
			if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
				k.raw = cert.PublicKey
			}
		case "PRIVATE KEY":
			k.raw, err = x509.ParsePKCS8PrivateKey(block.Bytes)
			k.private = true
		case "EC PRIVATE KEY":
			k.raw, err = x509.ParseECPrivateKey(block.Bytes)
			k.private = true
		case "RSA PRIVATE KEY":
			k.raw, err = x509.ParsePKCS1PrivateKey(block.Bytes)
			k.private = true
		case "EC PARAMETERS":
			continue // written by openssl ecparam before the key itself
		case "ENCRYPTED PRIVATE KEY":
			return nil, fmt.Errorf("%w: PEM block %q: decrypt the key first", ErrInvalidKey, block.Type)
		default:
			return nil, fmt.Errorf("%w: PEM block %q holds no key", ErrInvalidKey, block.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: PEM block %q: %v", ErrInvalidKey, block.Type, err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key in PEM input", ErrInvalidKey)
	}
	return keys, nil
}

// checkIssuerKeys refuses a key set that holds a private key (see Keys).
func checkIssuerKeys(set jwk.Set) error {
	if set == nil {
		return nil
	}
	for i := range set.Len() {
		k, _ := set.Key(i)
		var raw any
		if err := jwk.Export(k, &raw); err != nil {
			continue // the hub's verifier says what is wrong with it
		}
		switch raw.(type) {
		case *ecdsa.PrivateKey, *rsa.PrivateKey, ed25519.PrivateKey:
			return fmt.Errorf("%w: key %d is a private key: give the hub its public key, and keep the private key to the signer", ErrInvalidKey, i)
		}
	}
	return nil
}
