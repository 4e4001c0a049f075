//! What the daemon tells its operator: log lines ([`log`], every one of them from the
//! [`catalogue`]) and metrics ([`metrics`]).

pub(crate) mod catalogue;
pub(crate) mod log;
pub(crate) mod metrics;
