package team

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
)

// A team's key signs its messages, so it must never lie readable in the
// store: the lead hands it to an agent it takes from a pool sealed to that
// agent's one-time X25519 key (published in its pool record), which only
// the waiting process holds.

const poolKeyInfo = "troupe pool: team key"

// newPoolKey makes a waiting agent's one-time key pair, and its public
// half as the pool record carries it.
func newPoolKey() (*ecdh.PrivateKey, string, error) {
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", err
	}
	return priv, base64.StdEncoding.EncodeToString(priv.PublicKey().Bytes()), nil
}

// sealTeamKey seals key to the public key pub (newPoolKey's encoding).
func sealTeamKey(pub string, key []byte) (string, error) {
	raw, err := base64.StdEncoding.DecodeString(pub)
	if err != nil {
		return "", fmt.Errorf("the waiting agent's public key: %w", err)
	}
	peer, err := ecdh.X25519().NewPublicKey(raw)
	if err != nil {
		return "", fmt.Errorf("the waiting agent's public key: %w", err)
	}
	eph, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	aead, err := poolAEAD(eph, peer)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := append(append(eph.PublicKey().Bytes(), nonce...), aead.Seal(nil, nonce, key, nil)...)
	return base64.StdEncoding.EncodeToString(out), nil
}

// openTeamKey opens what sealTeamKey sealed to priv.
func openTeamKey(priv *ecdh.PrivateKey, sealed string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil {
		return nil, fmt.Errorf("sealed team key: %w", err)
	}
	const pubLen = 32
	if len(raw) < pubLen {
		return nil, errors.New("sealed team key: too short")
	}
	eph, err := ecdh.X25519().NewPublicKey(raw[:pubLen])
	if err != nil {
		return nil, fmt.Errorf("sealed team key: %w", err)
	}
	aead, err := poolAEAD(priv, eph)
	if err != nil {
		return nil, err
	}
	rest := raw[pubLen:]
	if len(rest) < aead.NonceSize() {
		return nil, errors.New("sealed team key: too short")
	}
	key, err := aead.Open(nil, rest[:aead.NonceSize()], rest[aead.NonceSize():], nil)
	if err != nil {
		return nil, fmt.Errorf("sealed team key: %w", err)
	}
	return key, nil
}

func poolAEAD(priv *ecdh.PrivateKey, peer *ecdh.PublicKey) (cipher.AEAD, error) {
	shared, err := priv.ECDH(peer)
	if err != nil {
		return nil, err
	}
	k, err := hkdf.Key(sha256.New, shared, nil, poolKeyInfo, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
