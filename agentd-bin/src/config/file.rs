//! The shape of `agentd.toml` as it is read, before validation: every value that an error
//! may name keeps its position (`Spanned`).

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

/// The whole file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct File {
    pub(super) instance: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) mcp: Mcp,
    pub(super) webhooks: Option<Webhooks>,
    pub(super) store: Option<Store>,
    #[serde(default)]
    pub(super) events: Events,
    #[serde(default)]
    pub(super) tools: ToolsFile,
    #[serde(default)]
    pub(super) lifecycle: Lifecycle,
    #[serde(default)]
    pub(super) limits: Limits,
    pub(super) model: Option<ModelFile>,
    pub(super) instruction: Option<InstructionFile>,
    #[serde(default)]
    pub(super) skills: SkillsFile,
    #[serde(default)]
    pub(super) workflows: Vec<Spanned<toml::Table>>,
    #[serde(default)]
    pub(super) security: SecurityFile,
    pub(super) knowledge: Option<FamilyFile>,
    pub(super) search: Option<FamilyFile>,
    #[serde(default)]
    pub(super) contracts: ContractsFile,
}

/// `[security]`.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SecurityFile {
    pub(super) exec: Option<ExecFile>,
}

/// `[security.exec]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExecFile {
    pub(super) enabled: Option<Spanned<bool>>,
    pub(super) timeout: Option<Spanned<String>>,
    pub(super) timeout_max: Option<Spanned<String>>,
    pub(super) output_max: Option<Spanned<u64>>,
    pub(super) file_max: Option<Spanned<u64>>,
    pub(super) concurrency: Option<Spanned<u64>>,
    pub(super) path: Option<Spanned<String>>,
}

/// `[knowledge]`, `[search]`: the server implementing the family's contract tools by name.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FamilyFile {
    pub(super) server: Spanned<String>,
}

/// `[contracts]`.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ContractsFile {
    /// `[contracts.map."TOOL"]`, by contract tool.
    #[serde(default)]
    pub(super) map: BTreeMap<Spanned<String>, MappingFile>,
}

/// `[contracts.map."TOOL"]`: a server's tool implementing one contract tool.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MappingFile {
    pub(super) server: Spanned<String>,
    pub(super) tool: Spanned<String>,
}

/// `[model]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ModelFile {
    pub(super) base_url: Spanned<String>,
    pub(super) model: Spanned<String>,
    pub(super) api_key: Option<Spanned<String>>,
    pub(super) max_output_tokens: Option<Spanned<u64>>,
}

/// `[instruction]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct InstructionFile {
    pub(super) server: Spanned<String>,
    pub(super) uri: Spanned<String>,
    pub(super) refresh: Option<Spanned<String>>,
}

/// `[skills]`.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SkillsFile {
    #[serde(default)]
    pub(super) sources: Vec<Spanned<String>>,
}

/// `[mcp]`.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Mcp {
    pub(super) default_timeout: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) servers: Vec<ServerFile>,
}

/// One `[[mcp.servers]]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ServerFile {
    pub(super) name: Spanned<String>,
    pub(super) url: Spanned<String>,
    pub(super) timeout: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) headers: BTreeMap<Spanned<String>, Spanned<String>>,
    #[serde(default)]
    pub(super) tags: BTreeMap<String, String>,
}

/// `[webhooks]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Webhooks {
    pub(super) url: Option<Spanned<String>>,
    pub(super) listen: Option<Spanned<String>>,
}

/// `[store]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Store {
    pub(super) path: Option<String>,
    pub(super) max_value_bytes: Option<Spanned<u64>>,
}

/// `[events]`.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Events {
    #[serde(default)]
    pub(super) bindings: Vec<BindingFile>,
    #[serde(default)]
    pub(super) grants: Vec<GrantFile>,
}

/// One `[[events.grants]]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GrantFile {
    pub(super) owner: Spanned<String>,
    pub(super) live: Option<Spanned<u32>>,
    #[serde(default)]
    pub(super) tools: bool,
}

/// One `[[events.bindings]]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BindingFile {
    pub(super) server: Spanned<String>,
    pub(super) event: String,
    pub(super) into: String,
    #[serde(default)]
    pub(super) arguments: serde_json::Map<String, serde_json::Value>,
    pub(super) delivery: Option<Spanned<Vec<String>>>,
    pub(super) max_per_minute: Option<Spanned<u32>>,
}

/// `[tools]`.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ToolsFile {
    #[serde(default)]
    pub(super) grants: ToolGrants,
}

/// `[tools.grants]`: per scope, the patterns its tools are narrowed to.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ToolGrants {
    pub(super) root: Option<Vec<Spanned<String>>>,
    pub(super) workflow: Option<Vec<Spanned<String>>>,
    pub(super) subagent: Option<Vec<Spanned<String>>>,
}

/// `[lifecycle]`.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Lifecycle {
    pub(super) drain_timeout: Option<Spanned<String>>,
}

/// `[limits]`.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Limits {
    pub(super) step_timeout: Option<Spanned<String>>,
    pub(super) turn_timeout: Option<Spanned<String>>,
    pub(super) budget_tokens: Option<Spanned<u64>>,
    pub(super) run_concurrency: Option<Spanned<u64>>,
    pub(super) run_retention: Option<Spanned<String>>,
}
