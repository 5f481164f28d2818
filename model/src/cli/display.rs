//! Progress while a run works: one stream for everything a person reads
//! (stdout in text mode; stderr when stdout carries JSON), updated in place
//! on a terminal and one line a second otherwise, with a line for each new
//! phase.

use highwater_model::run::{Phase, Progress};
use std::io::{IsTerminal, Write};

pub struct Display {
    /// Where lines go: stdout, or stderr when stdout carries JSON.
    to_stderr: bool,
    quiet: bool,
    tty: bool,
    phase: Option<Phase>,
    /// A line is on screen waiting to be overwritten.
    open_line: bool,
    /// Unique states of the configuration, when measured (for an estimate).
    known_states: Option<u64>,
}

impl Display {
    pub fn new(json: bool, quiet: bool, known_states: Option<u64>) -> Display {
        let tty = if json {
            std::io::stderr().is_terminal()
        } else {
            std::io::stdout().is_terminal()
        };
        Display {
            to_stderr: json,
            quiet,
            tty,
            phase: None,
            open_line: false,
            known_states,
        }
    }

    fn write(&mut self, text: &str, in_place: bool) {
        let mut out: Box<dyn Write> = if self.to_stderr {
            Box::new(std::io::stderr().lock())
        } else {
            Box::new(std::io::stdout().lock())
        };
        if self.open_line {
            let _ = write!(out, "\r\x1b[K");
        }
        if in_place && self.tty {
            let _ = write!(out, "{text}");
            self.open_line = true;
        } else {
            let _ = writeln!(out, "{text}");
            self.open_line = false;
        }
        let _ = out.flush();
    }

    /// The run starts: say what it does first.
    pub fn start(&mut self) {
        let p = Progress::default();
        self.heading(&p);
    }

    /// A snapshot from the run.
    pub fn update(&mut self, p: &Progress) {
        if self.quiet {
            return;
        }
        self.heading(p);
        let line = self.line(p);
        self.write(&line, true);
    }

    /// A line for each new phase.
    fn heading(&mut self, p: &Progress) {
        if self.quiet {
            return;
        }
        if self.phase != Some(p.phase) {
            if self.open_line {
                // Keep the last figures of the phase that ended.
                self.write_newline();
            }
            self.phase = Some(p.phase);
            let heading = p.phase.heading();
            self.write(heading, false);
        }
    }

    fn write_newline(&mut self) {
        let mut out: Box<dyn Write> = if self.to_stderr {
            Box::new(std::io::stderr().lock())
        } else {
            Box::new(std::io::stdout().lock())
        };
        let _ = writeln!(out);
        self.open_line = false;
    }

    fn line(&self, p: &Progress) -> String {
        let mut line = format!(
            "  {:>7.1}s  states {:>12}  unique {:>11}  depth {:>3}  {:>10.0} states/s",
            p.seconds,
            p.states,
            p.unique_states,
            p.max_depth,
            p.states_per_second()
        );
        if p.recovery_states > 0 {
            line.push_str(&format!("  recovery {}", p.recovery_states));
        }
        if let (Phase::Search, Some(known)) = (p.phase, self.known_states) {
            line.push_str(&format!(
                "  ~{:.0}% of {known} (measured)",
                100.0 * p.unique_states as f64 / known.max(1) as f64
            ));
        }
        line
    }

    /// The run is over: leave the last line on screen.
    pub fn finish(&mut self) {
        if self.open_line {
            self.write_newline();
        }
    }
}
