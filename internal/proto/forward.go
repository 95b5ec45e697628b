package legionpb

// ForwardedKey is the metadata a manager puts on a call it passes to the
// leader for someone else (a client's write, a node's heartbeat): the
// leader then knows the call was forwarded once already, and whose it was.
const ForwardedKey = "legion-forwarded"

// ForwardedUserKey names the user a forwarded call is made for. The
// leader believes it only from a manager's certificate, and then decides
// the call as that user's: their rights, and the checks made for users
// only.
const ForwardedUserKey = "legion-forwarded-user"
