package testcluster

// ClaimName is claimName, for the tests that claim octets as another
// test binary would.
var ClaimName = claimName
