package team

import "context"

// RunMember runs one teammate until it is shut down or ctx ends: the body of
// `troupe agent --team T --name N` in process mode. It shares nothing with
// the lead's process but the state directory.
func RunMember(ctx context.Context, cfg MemberConfig) error {
	m, err := NewMember(cfg)
	if err != nil {
		return err
	}
	cfg.Rules.agentHooks(cfg.Provider, cfg.DefaultModel, cfg.Workspace)
	bctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		beat(bctx, cfg.Team, func() []string { return []string{m.name} }, nil)
	}()
	err = m.Run(ctx)
	stop()
	<-done
	return err
}
