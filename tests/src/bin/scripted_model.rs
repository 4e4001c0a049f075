//! `scripted-model SCRIPT [--requests FILE]`: the scripted OpenAI-compatible model server
//! ([`agentd_tests::model`]) in a process of its own, for process tests of the daemon.
//!
//! It reads the script (JSON, shape in the module docs) from the file `SCRIPT`, binds
//! 127.0.0.1 port 0, prints its base URL (`http://127.0.0.1:PORT/v1`) on stdout, and with
//! `--requests FILE` appends each request it receives to `FILE` as one JSON line
//! (`method`, `path`, `headers`, `body`) before answering it. It exits when its stdin
//! closes (the test ended, or died).

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;

use agentd_tests::model::{Script, ScriptedModel};

const USAGE: &str = "usage: scripted-model SCRIPT [--requests FILE]";

fn main() -> ExitCode {
    let mut script = None;
    let mut requests = None;
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--requests") => requests = args.next().map(PathBuf::from),
            Some("-h" | "--help") => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ if script.is_none() => script = Some(PathBuf::from(arg)),
            _ => {
                eprintln!("{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let Some(script) = script else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let script: Script = match std::fs::read(&script)
        .map_err(|e| e.to_string())
        .and_then(|text| serde_json::from_slice(&text).map_err(|e| e.to_string()))
    {
        Ok(script) => script,
        Err(e) => {
            eprintln!("scripted-model: {}: {e}", script.display());
            return ExitCode::FAILURE;
        }
    };
    let log = match requests {
        None => None,
        Some(path) => match OpenOptions::new().create(true).append(true).open(&path) {
            Ok(file) => Some(Mutex::new(file)),
            Err(e) => {
                eprintln!("scripted-model: {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        },
    };
    // Stdin closed: the test is gone, and so is the server.
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        std::process::exit(0);
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let server = ScriptedModel::start_observed(script.replies, move |received| {
            if let Some(log) = &log {
                let mut line = serde_json::to_vec(received).expect("a request encodes");
                line.push(b'\n');
                let mut file = log.lock().unwrap_or_else(|e| e.into_inner());
                let _ = file.write_all(&line).and_then(|()| file.flush());
            }
        })
        .await;
        println!("{}", server.base_url());
        std::future::pending::<ExitCode>().await
    })
}
