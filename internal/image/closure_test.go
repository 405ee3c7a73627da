package image

import (
	"strings"
	"testing"
)

// lddOutput is glibc 2.36's ldd for llmd-router on Debian 12 (abridged).
const lddOutput = `	linux-vdso.so.1 (0x00007ffd4a1f6000)
	libzmq.so.5 => /lib/x86_64-linux-gnu/libzmq.so.5 (0x00007f22d1eba000)
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f22d1cd8000)
	/lib64/ld-linux-x86-64.so.2 (0x00007f22d1f8a000)
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f22d1cd8000)
`

func TestParseLDD(t *testing.T) {
	got, err := parseLDD([]byte(lddOutput))
	if err != nil {
		t.Fatal(err)
	}
	want := "/lib/x86_64-linux-gnu/libzmq.so.5 /lib/x86_64-linux-gnu/libc.so.6 /lib64/ld-linux-x86-64.so.2"
	if strings.Join(got, " ") != want {
		t.Fatalf("parseLDD = %q, want %q", got, want)
	}
	for in, wantErr := range map[string]string{
		"\tlibzmq.so.5 => not found\n":       `library "libzmq.so.5" not found`,
		"\tstatically linked\n":              "not dynamically linked",
		"\tnot a dynamic executable\n":       "not dynamically linked",
		"\tlinux-vdso.so.1 (0x00007ffd4a)\n": "no shared libraries",
	} {
		if _, err := parseLDD([]byte(in)); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("parseLDD(%q) = %v, want an error containing %q", in, err, wantErr)
		}
	}
}
