//! A model answering from a script, for the tests of turns and of the daemon's agent, and
//! the demo's turn: it records every request and, past its script, fails.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

#[cfg(test)]
use tokio::sync::Notify;
use tokio::time::Instant;

use super::model::{Finish, Function, Message, Model, ModelError, Reply, Request, ToolCall, Usage};

/// What the scripted model does when asked.
#[derive(Debug)]
pub(crate) enum Scene {
    /// Answers this.
    Reply(Reply),
    /// Says it was asked (`asked`), waits to be let go (`release`), then answers `reply`.
    #[cfg(test)]
    Held {
        asked: Arc<Notify>,
        release: Arc<Notify>,
        reply: Reply,
    },
    /// Never answers: fails at the deadline ([`ModelError::Deadline`]).
    #[cfg(test)]
    Hang,
}

/// A model answering from a script, recording every request; past its script it fails
/// ([`ModelError::Decode`]: "the script is over").
#[derive(Debug, Default)]
pub(crate) struct Scripted {
    scenes: Mutex<VecDeque<Scene>>,
    asked: Mutex<Vec<Asked>>,
}

/// A request as the scripted model was asked it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Asked {
    /// Its messages.
    pub(crate) messages: Vec<Message>,
    /// The tools offered.
    pub(crate) tools: Vec<Function>,
}

impl Scripted {
    /// A model playing `scenes`, in order.
    pub(crate) fn new(scenes: impl IntoIterator<Item = Scene>) -> Arc<Self> {
        Arc::new(Self {
            scenes: Mutex::new(scenes.into_iter().collect()),
            asked: Mutex::default(),
        })
    }

    /// What it was asked, in order.
    #[cfg(test)]
    pub(crate) fn asked(&self) -> Vec<Asked> {
        self.asked.lock().unwrap().clone()
    }
}

impl Model for Scripted {
    fn complete(
        &self,
        request: &Request<'_>,
        #[cfg_attr(
            not(test),
            expect(unused_variables, reason = "only a hang waits for it")
        )]
        deadline: Instant,
    ) -> impl Future<Output = Result<Reply, ModelError>> + Send {
        let asked = Asked {
            messages: request.messages.iter().map(|m| (**m).clone()).collect(),
            tools: request.tools.to_vec(),
        };
        self.asked.lock().unwrap().push(asked);
        let scene = self.scenes.lock().unwrap().pop_front();
        async move {
            match scene {
                Some(Scene::Reply(reply)) => Ok(reply),
                #[cfg(test)]
                Some(Scene::Held {
                    asked,
                    release,
                    reply,
                }) => {
                    asked.notify_one();
                    release.notified().await;
                    Ok(reply)
                }
                #[cfg(test)]
                Some(Scene::Hang) => {
                    tokio::time::sleep_until(deadline).await;
                    Err(ModelError::Deadline)
                }
                None => Err(ModelError::decode("the script is over", None)),
            }
        }
    }
}

/// The tokens every scripted reply used.
pub(crate) const USED: Usage = Usage {
    input: 10,
    output: 5,
};

/// A reply of `text` alone.
pub(crate) fn said(text: &str) -> Reply {
    Reply {
        text: Some(text.into()),
        calls: Vec::new(),
        finish: Finish::Stop,
        usage: USED,
    }
}

/// The scene of a reply of `text` alone.
pub(crate) fn text(text: &str) -> Scene {
    Scene::Reply(said(text))
}

/// The scene of a reply calling `(id, function, arguments)` each.
pub(crate) fn calls(calls: &[(&str, &str, &str)]) -> Scene {
    Scene::Reply(Reply {
        text: None,
        calls: calls
            .iter()
            .map(|(id, name, arguments)| ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: (*arguments).into(),
            })
            .collect(),
        finish: Finish::ToolCalls,
        usage: USED,
    })
}
