//! Subscribing a resource for an owner until the server takes it: a failure that may pass is
//! asked about again on [`SUBSCRIBE_RETRY`] (the server's task asks the server itself on its own
//! schedule meanwhile), so that its owner hears when it is taken at last.

use super::parts::{Servers, Unsubscribed};
use crate::clock::SUBSCRIBE_RETRY;

/// Subscribes `uri` of `server` for `owner`: `Ok` once it is taken, else the failure that
/// will not pass. Each failure that may pass is told to `failed` first (not the answers
/// that the server has not taken it yet); cancelled by dropping it.
pub(super) async fn until_taken(
    servers: &dyn Servers,
    server: &str,
    uri: &str,
    owner: &str,
    mut failed: impl FnMut(&str) + Send,
) -> Result<(), Unsubscribed> {
    let mut backoff = SUBSCRIBE_RETRY;
    loop {
        match servers.subscribe(server, uri, owner).await {
            Ok(()) => return Ok(()),
            Err(Unsubscribed::MayPass(err)) => failed(&err),
            Err(Unsubscribed::Pending) => {}
            Err(e) => return Err(e),
        }
        tokio::time::sleep(backoff.fail()).await;
    }
}
