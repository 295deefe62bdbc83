"""What TRL drives per rollout: `Episode` (one environment), `RoutingEnvironment` (namespaced), outcomes."""
