//! The held servers as the agent's parts reach them ([`Servers`]): each configured server's
//! [`Reach`], replaced as the supervisor replaces its tasks (a reload, a new instance name).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use mcp_negotiate::Client;

use super::server::{Handle, Reach};
use super::subscriptions::SubscriptionError;
use crate::agent::servers::{Absent, Answer, Refused, Servers};
use crate::cause::Cause;
use crate::workflows::{self, Boxed, Unsubscribed};

/// Every held server's [`Reach`], by name.
#[derive(Debug, Clone, Default)]
pub(crate) struct Held(Arc<RwLock<BTreeMap<String, Reach>>>);

impl Held {
    /// The servers held now are `servers`.
    pub(crate) fn set(&self, servers: &BTreeMap<String, Handle>) {
        let reached = servers
            .iter()
            .map(|(n, h)| (n.clone(), h.reach()))
            .collect();
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = reached;
    }

    fn reach(&self, server: &str) -> Option<Reach> {
        let held = self.0.read().unwrap_or_else(|e| e.into_inner());
        held.get(server).cloned()
    }
}

impl Servers for Held {
    fn connection(&self, server: &str) -> Result<Arc<Client>, Absent> {
        let reach = self.reach(server).ok_or(Absent::Unknown)?;
        reach.connected().ok_or(Absent::NotConnected)
    }

    fn subscribe(&self, server: &str, uri: &str, owner: &str) -> Answer {
        let (reach, uri, owner) = (self.reach(server), uri.to_owned(), owner.to_owned());
        Box::pin(async move {
            let reach = reach.ok_or(Refused::Gone)?;
            reach.subscribe(&uri, &owner).await.map_err(refused)
        })
    }

    fn release(&self, server: &str, uri: &str, owner: &str) -> Answer {
        let (reach, uri, owner) = (self.reach(server), uri.to_owned(), owner.to_owned());
        Box::pin(async move {
            let reach = reach.ok_or(Refused::Gone)?;
            reach.release(&uri, &owner).await.map_err(refused)
        })
    }
}

fn refused(e: SubscriptionError) -> Refused {
    match e {
        SubscriptionError::Pending => Refused::Pending,
        SubscriptionError::Gone => Refused::Gone,
        other => Refused::Failed(Cause::new(other)),
    }
}

/// The steps of workflows reach the held servers too: a connection once it is made, and
/// their waits' subscriptions.
impl workflows::Servers for Held {
    fn connection<'a>(&'a self, server: &'a str) -> Boxed<'a, Option<Arc<Client>>> {
        let reach = self.reach(server);
        Box::pin(async move { reach?.connection().await })
    }

    fn state(&self, server: &str) -> (bool, bool) {
        match self.reach(server) {
            None => (false, false),
            Some(reach) => (true, reach.connected().is_some()),
        }
    }

    fn subscribe<'a>(
        &'a self,
        server: &'a str,
        uri: &'a str,
        owner: &'a str,
    ) -> Boxed<'a, Result<(), Unsubscribed>> {
        let reach = self.reach(server);
        Box::pin(async move {
            let reach = reach.ok_or(Unsubscribed::Unknown)?;
            let connection = reach.connection().await.ok_or(Unsubscribed::Gone)?;
            if !connection.capabilities().resources_subscribe() {
                return Err(Unsubscribed::Unsupported);
            }
            reach.subscribe(uri, owner).await.map_err(unsubscribed)
        })
    }

    fn release<'a>(
        &'a self,
        server: &'a str,
        uri: &'a str,
        owner: &'a str,
    ) -> Boxed<'a, Result<(), Unsubscribed>> {
        let reach = self.reach(server);
        Box::pin(async move {
            let reach = reach.ok_or(Unsubscribed::Unknown)?;
            reach.release(uri, owner).await.map_err(unsubscribed)
        })
    }
}

fn unsubscribed(e: SubscriptionError) -> Unsubscribed {
    match e {
        SubscriptionError::Gone => Unsubscribed::Gone,
        SubscriptionError::Pending => Unsubscribed::Pending,
        other => Unsubscribed::MayPass(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn a_failure_keeps_the_subscription_error_as_its_source() {
        let failed = refused(SubscriptionError::Unanswered);
        let Refused::Failed(cause) = &failed else {
            panic!("{failed:?}");
        };
        let source = failed.source().expect("kept");
        assert!(matches!(
            source.downcast_ref::<SubscriptionError>(),
            Some(SubscriptionError::Unanswered)
        ));
        assert_eq!(failed.to_string(), cause.to_string());
        assert_eq!(refused(SubscriptionError::Pending), Refused::Pending);
        assert_eq!(refused(SubscriptionError::Gone), Refused::Gone);
    }
}
