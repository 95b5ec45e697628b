package legionpb

// ForwardedKey is the metadata a manager puts on a call it passes to the
// leader for someone else (a client's write, a node's heartbeat): the
// leader then knows the call was forwarded once already, and whose it was.
const ForwardedKey = "legion-forwarded"
