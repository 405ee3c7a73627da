package testenv

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
)

// engineS3Env gives an engine the object store a pod reaches through its
// VPC's S3 gateway endpoint: moto's S3, forwarded from the engine's host
// side of its veth pair (moto listens on loopback, which the engine's
// network namespace cannot reach), with static test credentials in place
// of EKS Pod Identity's (only real EKS hands those out; the real-AWS
// validation guide covers them).
//
// Path-style addressing is the test ground's, not the product's: moto is
// addressed by IP, where a virtual-hosted bucket name cannot resolve
// (RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING, runai-model-streamer's S3
// backend); on AWS the streamer's default virtual-hosted form is used.
func engineS3Env(slot int, moto *Moto) (env map[string]string, stop func(), err error) {
	u, err := url.Parse(moto.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("moto's URL %q: %w", moto.URL, err)
	}
	l, err := net.Listen("tcp", fmt.Sprintf("10.251.%d.1:0", slot))
	if err != nil {
		return nil, nil, fmt.Errorf("listening for the engine's S3 endpoint: %w", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go forwardConn(c, u.Host)
		}
	}()
	stop = func() { l.Close(); wg.Wait() }
	return map[string]string{
		"AWS_ENDPOINT_URL":      "http://" + l.Addr().String(),
		"AWS_ACCESS_KEY_ID":     "testing",
		"AWS_SECRET_ACCESS_KEY": "testing",
		"AWS_REGION":            "us-west-2",
		// No instance metadata service answers here; the SDK would wait
		// for it before the environment's credentials.
		"AWS_EC2_METADATA_DISABLED":                "true",
		"RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING": "0",
	}, stop, nil
}

// forwardConn copies c to and from a new connection to addr until either
// side closes.
func forwardConn(c net.Conn, addr string) {
	defer c.Close()
	up, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}
