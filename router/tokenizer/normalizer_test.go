package tokenizer

import (
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// TestASCIIIsNormal checks the fast path against the forms themselves: a
// byte at or above 0x80 anywhere (each offset around the eight-byte
// stride) is found, and ASCII text is what every form makes of it.
func TestASCIIIsNormal(t *testing.T) {
	ascii := strings.Repeat("Plain text, digits 0123456789 and\ttabs~\x00\x7f", 3)
	if !isASCII(ascii) || !isASCII("") {
		t.Fatal("ASCII text not recognised")
	}
	for _, f := range []norm.Form{norm.NFC, norm.NFD, norm.NFKC, norm.NFKD} {
		if got := (unicodeForm{f}).normalize(ascii); got != ascii || f.String(ascii) != ascii {
			t.Errorf("form %v changed ASCII text", f)
		}
	}
	for i := 0; i < 20; i++ {
		s := ascii[:i] + "é" + ascii[i:30]
		if isASCII(s) {
			t.Errorf("é at byte %d: taken for ASCII", i)
		}
		if got, want := (unicodeForm{norm.NFD}).normalize(s), norm.NFD.String(s); got != want {
			t.Errorf("é at byte %d: NFD gives %q, want %q", i, got, want)
		}
	}
}
