package jobenv

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// A job's [env] holds secrets (WANDB_API_KEY, HF_TOKEN), so its values
// never go on a command line, where any user of the host reads them (ps).
// They travel to the host agents as the job's token does: in the
// agent's environment (local, Slurm) or on its stdin (ssh). Sealed under
// the token first, because a Slurm step's environment crosses the network
// in Slurm's RPCs, which MUNGE signs but does not encrypt: the token
// itself does not go there when the bus runs TLS (the agent gets it over
// its TLS link), so neither can anything it does not seal. An agent opens
// the sealed [env] once it holds the token.

// MaxSealedEnv bounds a sealed [env]: it travels as one variable, and
// Linux takes no longer string in an environment (MAX_ARG_STRLEN, 128
// KiB, with the variable's name).
const MaxSealedEnv = 128<<10 - len(varSealedEnv) - 2

// sealInfo names what the key derived from the token is for.
const sealInfo = "monarch job env v1"

// SealEnv seals env (KEY=VALUE: the job file's [env] and the launcher's
// variables for the procs) under the job's token: AES-256-GCM under a
// key derived from the token (HKDF-SHA256), a fresh nonce each time, in
// base64 (URL alphabet, no padding). Only a holder of the token opens it
// (OpenEnv). An env whose sealed form is longer than MaxSealedEnv is an
// error that says so.
func SealEnv(token string, env []string) (string, error) {
	if token == "" {
		return "", errors.New("jobenv: no token to seal the job's [env] under")
	}
	// NUL-separated: no variable holds one (exec refuses it), and every
	// other byte goes through as it is.
	for i, kv := range env {
		if strings.IndexByte(kv, 0) >= 0 {
			return "", fmt.Errorf("jobenv: variable %d of the job's [env] holds a NUL byte", i)
		}
	}
	plain := []byte(strings.Join(env, "\x00"))
	aead, err := envCipher(token)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	rand.Read(nonce)
	sealed := base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, plain, nil))
	if len(sealed) > MaxSealedEnv {
		return "", fmt.Errorf("jobenv: the job's [env] is %d bytes (%d sealed); at most %d sealed travel to the host agents "+
			"(one variable, Linux's limit): put large values in files", len(plain), len(sealed), MaxSealedEnv)
	}
	return sealed, nil
}

// OpenEnv opens what SealEnv sealed under token: the variables, each
// KEY=VALUE. "" is no variables. An error says what is wrong (a wrong
// token, a damaged or oversized text, a malformed variable) without
// showing any value.
func OpenEnv(token, sealed string) ([]string, error) {
	if sealed == "" {
		return nil, nil
	}
	if len(sealed) > MaxSealedEnv {
		return nil, fmt.Errorf("jobenv: the sealed [env] is %d bytes, over the bound of %d", len(sealed), MaxSealedEnv)
	}
	b, err := base64.RawURLEncoding.DecodeString(sealed)
	if err != nil {
		return nil, fmt.Errorf("jobenv: the sealed [env] is not base64: %w", err)
	}
	aead, err := envCipher(token)
	if err != nil {
		return nil, err
	}
	if len(b) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("jobenv: the sealed [env] is %d bytes, too short to be one", len(b))
	}
	plain, err := aead.Open(nil, b[:aead.NonceSize()], b[aead.NonceSize():], nil)
	if err != nil {
		return nil, errors.New("jobenv: the sealed [env] does not open with this job's token (another job's, or damaged)")
	}
	if len(plain) == 0 {
		return nil, nil
	}
	env := strings.Split(string(plain), "\x00")
	for i, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("jobenv: variable %d of the sealed [env] is not KEY=VALUE", i)
		}
	}
	return env, nil
}

// envCipher is the AEAD of token's sealed [env].
func envCipher(token string) (cipher.AEAD, error) {
	if token == "" {
		return nil, errors.New("jobenv: no token to open the job's [env] with")
	}
	key, err := hkdf.Key(sha256.New, []byte(token), nil, sealInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("jobenv: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("jobenv: %w", err)
	}
	return cipher.NewGCM(block)
}
