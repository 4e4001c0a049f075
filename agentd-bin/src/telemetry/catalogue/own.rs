//! agentd's own events: the reference's tables have none for them.

use std::net::SocketAddr;

use mcp_wire::log_text;

use super::line::line;

/// The events of this module, for the check against the reference's tables.
#[cfg(test)]
pub(super) const NAMES: &[&str] = &[
    "http.listening",
    "reload.refused",
    "tool.call",
    "human.asked",
    "human.answered",
    "human.withdrawn",
    "tool.name.collision",
    "turn.failed",
    "budget.spent",
    "instruction.read.fail",
    "skills.discover.fail",
    "workflow.started",
    "workflow.ended",
    "workflow.retry",
    "workflow.unsaved",
    "workflow.prune.fail",
    "exec.sweep.fail",
];

/// `http.listening` (info): the daemon's HTTP listener is bound at `addr`.
pub(crate) fn http_listening(instance: &str, addr: SocketAddr) {
    line!(INFO, "http.listening", instance, addr = addr.to_string());
}

/// `reload.refused` (warn): the configuration read at SIGHUP was not taken (`err`, why); the
/// daemon goes on as it was.
pub(crate) fn reload_refused(instance: &str, err: &str) {
    line!(WARN, "reload.refused", instance, err = err);
}

/// `tool.call` (debug): one of agentd's own tools was called by `scope` in `unit`, and came
/// to `outcome` (`ok`, or the error's code). Neither the arguments nor the values are
/// written.
pub(crate) fn tool_call(instance: &str, tool: &str, scope: &str, unit: &str, outcome: &str) {
    line!(
        DEBUG,
        "tool.call",
        instance,
        tool = tool,
        scope = scope,
        unit = unit,
        outcome = outcome
    );
}

/// `human.asked` (info): question `id` was put to a person, asked by `origin` (`ask_human` or
/// `elicitation`) for `from` (the unit, or the server). Neither the question nor its schema
/// is written: `agentd human list` shows them.
pub(crate) fn human_asked(instance: &str, id: u64, origin: &str, from: &str) {
    line!(
        INFO,
        "human.asked",
        instance,
        id = id,
        origin = origin,
        from = log_text(from)
    );
}

/// `human.answered` (info): question `id` was answered with an answer that fits its schema
/// (the answer is not written).
pub(crate) fn human_answered(instance: &str, id: u64, origin: &str, from: &str) {
    line!(
        INFO,
        "human.answered",
        instance,
        id = id,
        origin = origin,
        from = log_text(from)
    );
}

/// `human.withdrawn` (info): question `id`'s asker stopped waiting before it was answered
/// (its timeout, shutdown, or the asker gone): it is cancelled.
pub(crate) fn human_withdrawn(instance: &str, id: u64, origin: &str, from: &str) {
    line!(
        INFO,
        "human.withdrawn",
        instance,
        id = id,
        origin = origin,
        from = log_text(from)
    );
}

/// `instruction.read.fail` (warn): the instruction `uri` of `server` could not be read, or
/// was no instruction (`err`: the server's error, binary contents, past the size bound); the
/// instruction read before stays the system prompt.
pub(crate) fn instruction_read_fail(instance: &str, server: &str, uri: &str, err: &str) {
    line!(
        WARN,
        "instruction.read.fail",
        instance,
        server = server,
        uri = log_text(uri),
        err = log_text(err),
    );
}

/// `skills.discover.fail` (warn): the prompts of skills source `server` could not be
/// listed (`err`); its skills as last listed stay.
pub(crate) fn skills_discover_fail(instance: &str, server: &str, err: &str) {
    line!(
        WARN,
        "skills.discover.fail",
        instance,
        server = server,
        err = log_text(err),
    );
}

/// `tool.name.collision` (warn): a tool offered to the model (`tool`, of `server`, none for
/// agentd's own) came to a function name another tool offered before it has (`wanted`), and
/// is offered as `name` instead.
pub(crate) fn tool_name_collision(
    instance: &str,
    server: Option<&str>,
    tool: &str,
    wanted: &str,
    name: &str,
) {
    line!(
        WARN,
        "tool.name.collision",
        instance,
        server = server,
        tool = tool,
        wanted = wanted,
        name = name
    );
}

/// `turn.failed` (warn): turn `turn` of `conversation` ended without an answer (`err`, why:
/// the model failed, the deadline passed, the store failed).
pub(crate) fn turn_failed(instance: &str, conversation: &str, turn: u64, err: &str) {
    line!(
        WARN,
        "turn.failed",
        instance,
        conversation = conversation,
        turn = turn,
        err = err
    );
}

/// `budget.spent` (warn): the instance's conversations used `used` tokens of its budget of
/// `limit` (`limits.budget_tokens`): no turn starts until a reload raises it. Logged once,
/// at the first turn refused, and again after the budget changes.
pub(crate) fn budget_spent(instance: &str, used: u64, limit: u64) {
    line!(WARN, "budget.spent", instance, used = used, limit = limit);
}

/// `workflow.started` (info): run `run` of `workflow` was started by `by` (a unit, or
/// `operator`). Its input is not written.
pub(crate) fn workflow_started(instance: &str, run: &str, workflow: &str, by: &str) {
    line!(
        INFO,
        "workflow.started",
        instance,
        run = run,
        workflow = workflow,
        by = log_text(by),
    );
}

/// `workflow.ended` (info; warn when it failed): run `run` of `workflow` ended at `status`
/// (`completed`, `failed`, `cancelled`), with the failure's code and message as `err`. Its
/// output is not written.
pub(crate) fn workflow_ended(
    instance: &str,
    run: &str,
    workflow: &str,
    status: &str,
    err: Option<&str>,
) {
    let level = match err {
        Some(_) => tracing::Level::WARN,
        None => tracing::Level::INFO,
    };
    line!(
        dyn level,
        "workflow.ended",
        instance,
        run = run,
        workflow = workflow,
        status = status,
        err = err.map(log_text),
    );
}

/// `workflow.retry` (warn): attempt `attempt` of step `step` of run `run` failed (`err`);
/// the next is made `retry_ms` later, with the same idempotency key.
pub(crate) fn workflow_retry(
    instance: &str,
    run: &str,
    step: &str,
    attempt: u32,
    err: &str,
    retry_ms: i64,
) {
    line!(
        WARN,
        "workflow.retry",
        instance,
        run = run,
        step = step,
        attempt = attempt,
        err = log_text(err),
        retry_ms = retry_ms,
    );
}

/// `workflow.unsaved` (warn): run `run` could not be kept in the store (`err`); it is set
/// back to what the store keeps and read back from there. A run a start could not begin is
/// logged under the id it would have had; run `*` is none: a definition the store holds
/// that does not parse, the store failing to read runs or starts.
pub(crate) fn workflow_unsaved(instance: &str, run: &str, err: &str) {
    line!(
        WARN,
        "workflow.unsaved",
        instance,
        run = run,
        err = log_text(err)
    );
}

/// `workflow.prune.fail` (warn): the runs that ended before their retention could not be
/// pruned from the store (`err`); tried again at the next prune.
pub(crate) fn workflow_prune_fail(instance: &str, err: &str) {
    line!(WARN, "workflow.prune.fail", instance, err = log_text(err));
}

/// `exec.sweep.fail` (warn): what calls of `exec` left under the store (`<store>/exec`) when
/// the last daemon stopped mid-call could not all be removed at start (`err`, why).
#[cfg_attr(not(any(feature = "exec", test)), expect(dead_code))]
pub(crate) fn exec_sweep_fail(instance: &str, err: &str) {
    line!(WARN, "exec.sweep.fail", instance, err = err);
}
