package server

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// fits checks that ids can authenticate on this API: principals that
// present certificates need the handshake to ask for them.
func (a *apiServer) fits(ids *identities) error {
	if ids.needsClientCerts && !a.clientCA {
		return fmt.Errorf("--auth-file has principals that authenticate by client certificate (uri_sans, dns_sans): set --tls-client-ca (with --tls-cert and --tls-key)")
	}
	return nil
}

// reload loads the identities again and makes them those of every request
// from now on. Connections and streams stay open; a request admitted
// before keeps its principal. A load that fails changes nothing: the
// identities in force stay, and the error says why.
func (a *apiServer) reload(load func() (*identities, error)) error {
	if a.auth == nil {
		return fmt.Errorf("the node runs without authentication (no --auth-file or --auth-token-file): nothing to reload")
	}
	ids, err := load()
	if err == nil {
		err = a.fits(ids)
	}
	if err != nil {
		return fmt.Errorf("identities not reloaded, the previous ones stay in force: %w", err)
	}
	a.auth.swap(ids)
	return nil
}

// ReloadAuth reads the node's --auth-file (or --auth-token-file) again, as
// SIGHUP does: see apiServer.reload.
func (n *Node) ReloadAuth() error { return n.s.reloadAuth() }

func (s *server) reloadAuth() error {
	var loaded *identities
	err := s.api.reload(func() (*identities, error) {
		ids, err := s.identities.load()
		loaded = ids
		return ids, err
	})
	if err != nil {
		s.log.Error("auth reload failed", "err", err)
		return err
	}
	// The quotas change with the principals: the same file, the same
	// reload (a failed one keeps both).
	s.store.SetQuotas(loaded.storeQuotas())
	s.log.Info("auth reloaded", "file", s.identities.authFile+s.identities.tokenFile)
	return nil
}

// withClientCA makes cfg ask clients for a certificate and verify one
// against the PEM bundle at path; a client without one still connects
// (and authenticates by token).
func withClientCA(cfg *tls.Config, path string) error {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--tls-client-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return fmt.Errorf("--tls-client-ca %s holds no PEM certificate", path)
	}
	cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	return nil
}
