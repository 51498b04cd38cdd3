package token

// WritePrivate exposes the private plaintext writer to the tests, so that
// fuzzing can check round trips without paying for encryption.
func WritePrivate(b []byte, p *Private) {
	writePrivate(b, p.ClientID, p.TimeoutSeconds, p.ServerAddrs, &p.ClientToServerKey, &p.ServerToClientKey, &p.UserData)
}

// ChallengeScratch exposes OpenChallenge's scratch pool, so that a test can
// check what it leaves behind.
var ChallengeScratch = &chScratch
