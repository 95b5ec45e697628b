package legion

// The Object methods of every kind: pointers to their spec and status.

func (o *Namespace) SpecPtr() any       { return &o.Spec }
func (o *Namespace) StatusPtr() any     { return &o.Status }
func (o *Node) SpecPtr() any            { return &o.Spec }
func (o *Node) StatusPtr() any          { return &o.Status }
func (o *Service) SpecPtr() any         { return &o.Spec }
func (o *Service) StatusPtr() any       { return &o.Status }
func (o *Job) SpecPtr() any             { return &o.Spec }
func (o *Job) StatusPtr() any           { return &o.Status }
func (o *CronJob) SpecPtr() any         { return &o.Spec }
func (o *CronJob) StatusPtr() any       { return &o.Status }
func (o *Task) SpecPtr() any            { return &o.Spec }
func (o *Task) StatusPtr() any          { return &o.Status }
func (o *Secret) SpecPtr() any          { return &o.Spec }
func (o *Secret) StatusPtr() any        { return nil }
func (o *Config) SpecPtr() any          { return &o.Spec }
func (o *Config) StatusPtr() any        { return nil }
func (o *Volume) SpecPtr() any          { return &o.Spec }
func (o *Volume) StatusPtr() any        { return &o.Status }
func (o *NetworkPolicy) SpecPtr() any   { return &o.Spec }
func (o *NetworkPolicy) StatusPtr() any { return nil }
func (o *Route) SpecPtr() any           { return &o.Spec }
func (o *Route) StatusPtr() any         { return &o.Status }
func (o *RoleBinding) SpecPtr() any     { return &o.Spec }
func (o *RoleBinding) StatusPtr() any   { return nil }
func (o *ImagePolicy) SpecPtr() any     { return &o.Spec }
func (o *ImagePolicy) StatusPtr() any   { return nil }
