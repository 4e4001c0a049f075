//! What the daemon tells its operator: log lines ([`log`]) and metrics ([`metrics`]).

pub(crate) mod log;
pub(crate) mod metrics;
