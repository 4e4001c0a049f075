//! One task per held server: its types listed (and listed again when asked), and a task per
//! binding handed to it, so that a slow request of one binding holds up no other.

use std::sync::Arc;

use mcp_events::binding::Failure;
use mcp_events::listing::{Lister, Step};
use mcp_negotiate::Client;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use super::binding::{On, run_binding};
use super::report::count;
use super::shared::{Armed, Feed, Listed, Shared, facts, far, request};
use crate::clock::{now, random};
use crate::telemetry::catalogue::events as logs;

/// One server: a task per binding handed to it, so that a slow request of one binding holds
/// up no other, and its types listed (and listed again when asked) once it has one.
pub(super) async fn serve(
    ctx: Shared,
    server: String,
    Feed {
        mut connections,
        mut changed,
    }: Feed,
    mut armed: mpsc::UnboundedReceiver<Armed>,
    mut reloads: watch::Receiver<u64>,
    stop: CancellationToken,
) {
    let connection = tokio::select! {
        c = connections.wait_for(Option::is_some) => match c {
            Ok(c) => c.clone().expect("waited for a connection"),
            Err(_) => return,
        },
        () = stop.cancelled() => return,
    };
    let (mut modern, mut capability) = facts(&connection);
    let (listed, listings) = watch::channel::<Option<Arc<Listed>>>(None);
    let (relist, mut relists) = mpsc::channel::<()>(16);
    // Listed from the first binding on.
    let mut lister: Option<Lister> = None;
    loop {
        let due = lister
            .as_mut()
            .filter(|_| modern && capability)
            .and_then(|l| Some((l.poll_request(now())?, l)));
        if let Some((cursor, lister)) = due {
            match list_pages(&ctx, &server, &connection, lister, cursor).await {
                Ok(outcome) => {
                    if let Listed::Types(types) = &outcome {
                        logs::listed(&ctx.instance, &server, types.len());
                    }
                    listed.send_replace(Some(Arc::new(outcome)));
                }
                Err(failure) => {
                    let exhausted = matches!(&failure, Failure::Rpc(e)
                        if e.code == mcp_wire::events::code::EVENTS_RESOURCE_EXHAUSTED);
                    let wait = lister.on_failure(now(), exhausted, random());
                    let retry_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
                    logs::list_fail(&ctx.instance, &server, &failure.to_string(), retry_ms);
                }
            }
            continue;
        }
        let next = lister
            .as_ref()
            .and_then(Lister::poll_timeout)
            .filter(|_| modern && capability);
        tokio::select! {
            () = sleep_until(next.map_or_else(far, Instant::from_std)) => {}
            Some((b, hooks, ends)) = armed.recv() => {
                let on = On {
                    ctx: ctx.clone(),
                    server: server.clone(),
                    connection: connection.clone(),
                    relist: relist.clone(),
                };
                tokio::spawn(run_binding(
                    on,
                    b,
                    hooks,
                    ends,
                    (connections.clone(), listings.clone(), reloads.clone()),
                ));
                lister.get_or_insert_with(|| Lister::new(now(), &ctx.limits));
            }
            // A binding's type went away or changed in place.
            Some(()) = relists.recv() => again(&mut lister),
            // The server said its types changed (`mcp.events.list_changed`).
            Ok(()) = changed.changed() => again(&mut lister),
            // The session was lost and dialed again: what it reached is asked afresh.
            Ok(()) = connections.changed() => {
                (modern, capability) = facts(&connection);
                again(&mut lister);
            }
            // A reload lists again.
            Ok(()) = reloads.changed() => again(&mut lister),
            () = stop.cancelled() => return,
        }
    }
}

/// Lists `server`'s types over `connection` from page `cursor` to the end, each request
/// counted and the clock read after each answer: what the listing came to, or the failure
/// that cut it short (for the caller to tell `lister`).
pub(super) async fn list_pages(
    ctx: &Shared,
    server: &str,
    connection: &Client,
    lister: &mut Lister,
    mut cursor: Option<mcp_wire::Cursor>,
) -> Result<Listed, Failure> {
    loop {
        let page = request(connection.list_events(cursor)).await;
        count(ctx, server, mcp_wire::method::EVENTS_LIST, &page);
        let now = now();
        match page {
            Ok(page) => match lister.on_page(page, now) {
                Step::More => {}
                Step::Done(types) => return Ok(Listed::Types(types)),
                _ => return Ok(Listed::TooLarge),
            },
            Err(Failure::Rpc(e)) if e.code == mcp_wire::code::METHOD_NOT_FOUND => {
                lister.hold(now);
                return Ok(Listed::MethodNotFound);
            }
            Err(failure) => return Err(failure),
        }
        cursor = lister
            .poll_request(now)
            .ok_or_else(|| Failure::Transport("the listing stopped short".to_owned()))?;
    }
}

fn again(lister: &mut Option<Lister>) {
    if let Some(lister) = lister {
        lister.again(now());
    }
}
