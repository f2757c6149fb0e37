package token

import "testing"

// BenchmarkVerify verifies tokens from scratch, without the cache;
// BenchmarkVerifyCached presents a remembered one.
func BenchmarkVerify(b *testing.B) {
	o := testOptions(b)
	o.CacheSize = -1
	v, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		alg, kid string
		key      any
	}{
		{"ES256", "a-es256", fx.es256},
		{"RS256", "a-rsa", fx.rsa},
		{"EdDSA", "a-ed", fx.ed},
		{"HS256", "a-hs32", fx.hs32},
	} {
		raw := mint(b, c.alg, c.key, defaultHeader(c.alg, c.kid), defaultClaims(), nil)
		b.Run(c.alg, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, err := v.Verify(raw, Publisher); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkVerifyCached(b *testing.B) {
	v := newTestVerifier(b)
	raw := mint(b, "ES256", fx.es256, defaultHeader("ES256", "a-es256"), defaultClaims(), nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := v.Verify(raw, Publisher); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckClaims measures alone the scan Verify makes of the
// claims once jwx has decoded them.
func BenchmarkCheckClaims(b *testing.B) {
	payload := mustJSON(b, defaultClaims())
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if err := checkClaims(payload); err != nil {
			b.Fatal(err)
		}
	}
}
