use std::io::{BufRead, BufReader, Lines};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `convrag serve` of the binary under test, without the caller's configuration file; the
/// caller adds the environment the test needs.
pub fn serve_command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_convrag"));
    cmd.arg("serve").env_remove("CONVRAG_CONFIG");
    cmd
}

/// A running `convrag serve`, killed when dropped so that a failing test leaves no server behind.
pub struct ServeProcess {
    child: Child,
    /// The API's base URL, from the `convrag listening on URL` line.
    pub url: String,
    /// The lines printed before that one (the other listeners' addresses).
    pub printed: Vec<String>,
    /// Standard error, collected on a thread when started with [`ServeProcess::start_logged`].
    stderr: Arc<Mutex<String>>,
    // Kept open: a server writing to a closed pipe would fail.
    _stdout: Lines<BufReader<ChildStdout>>,
}

impl ServeProcess {
    /// Starts `cmd` (a [`serve_command`]) with standard output piped and waits until it prints
    /// its address.
    pub fn start(cmd: &mut Command) -> ServeProcess {
        let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        // Read from the start: a server blocked on a full pipe would never print its address.
        if let Some(pipe) = child.stderr.take() {
            let sink = stderr.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let mut log = sink.lock().unwrap_or_else(|e| e.into_inner());
                    log.push_str(&line);
                    log.push('\n');
                }
            });
        }
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut process = ServeProcess {
            child,
            url: String::new(),
            printed: Vec::new(),
            stderr,
            _stdout: stdout,
        };
        loop {
            let line = process
                ._stdout
                .next()
                .expect("serve printed its address")
                .unwrap();
            if let Some(url) = line.strip_prefix("convrag listening on ") {
                process.url = url.to_string();
                return process;
            }
            process.printed.push(line);
        }
    }

    /// [`ServeProcess::start`] with standard error collected for [`ServeProcess::log`].
    pub fn start_logged(cmd: &mut Command) -> ServeProcess {
        Self::start(cmd.stderr(Stdio::piped()))
    }

    /// What the process wrote to standard error so far (started with
    /// [`ServeProcess::start_logged`]; empty otherwise).
    pub fn log(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// What followed `prefix` on a line printed before the API's address.
    pub fn printed_after(&self, prefix: &str) -> Option<&str> {
        self.printed.iter().find_map(|l| l.strip_prefix(prefix))
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` and waits up to a minute for the process to exit on its own.
    pub fn terminate(&mut self, signal: i32) -> ExitStatus {
        unsafe { libc::kill(self.child.id() as i32, signal) };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "serve did not stop");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills the process at once, as a crash would.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
