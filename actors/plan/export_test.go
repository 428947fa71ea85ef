package plan

import "context"

// WaitNoActors returns once no plan actor of s is live, or ctx's error; it
// lets tests wait for idle passivation without polling.
func WaitNoActors(ctx context.Context, s *Service) error { return s.env.owners.Live.WaitNone(ctx) }

// Activations counts plan owners started since Start.
func Activations(s *Service) int64 { return s.env.owners.Activations.Load() }
