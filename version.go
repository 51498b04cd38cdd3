package netcode

// Version is this module's release, in semantic-versioning form without the
// leading "v". It is the one home of the version: CHANGELOG.md lists what
// each release changed, a release tag is "v" + Version, and "netcode
// version" prints it beside the build information of the binary.
const Version = "0.2.0"
