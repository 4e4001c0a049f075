//! Workflows: definitions ([`definition`], their templates in [`template`]), durable runs as a
//! state machine without IO ([`run`]), and the `workflow.*` tools over [`Workflows`], the
//! service the daemon implements (its runs kept in its store, its steps executed over the
//! supervisor's connections) and [`in_memory::Runs`] implements for tests.
//!
//! The tools:
//! - `workflow.create` and `workflow.update` `{name, definition}`: a definition checked whole
//!   ([`Definition::parse`]; refused `invalid_arguments` at `/definition…`, naming the step
//!   and the rule), `exists` / `not_found`; answered `{"workflow", "version", "steps"}`;
//! - `workflow.delete` `{name}`: `{"deleted"}`; a run under way keeps its definition;
//! - `workflow.run` `{workflow, input?}`: a run started (the input, `{}` when not given,
//!   checked against the workflow's input schema), answered as `workflow.status`;
//!   `too_many_runs` (with the bound as `max`) when the service runs as many as it allows;
//! - `workflow.status` `{run}`: [`Record::to_value`], `unknown_run` when there is none;
//! - `workflow.list` `{workflow?, status?, after?, limit?}`: runs oldest first, `limit` (50
//!   unless given, at most 100) after `after` (a run, or the `next` of the page before,
//!   which holds while runs are pruned): `{"runs": [summary], "next"}`;
//! - `workflow.cancel`, `workflow.pause`, `workflow.resume` `{run}` and `workflow.signal`
//!   `{run, signal, payload?}`: the run afterwards; `already_finished` once it ended;
//! - `workflow.wait` `{run, timeout?}`: the run once it ended, or as it is when the timeout
//!   (60 s unless given, 1 ms to 1 h) passed first.
//!
//! A workflow's name is the configuration's or the store's: `workflow.update` and
//! `workflow.delete` refuse one defined in the configuration (`invalid_arguments` at `/name`,
//! rule `configured`), `workflow.create` refuses its name (`exists`).

pub mod definition;
pub mod in_memory;
pub mod run;
mod service;
pub mod template;
#[cfg(test)]
mod tests;
mod tools;

pub use self::definition::{Definition, DefinitionError, Start, StartOn};
pub use self::run::{Record, Status};
pub use self::service::{Command, Defined, Filter, Page, Workflows, configured, unknown};
pub(crate) use self::tools::call;
pub use self::tools::{LIST_DEFAULT, LIST_MAX};
