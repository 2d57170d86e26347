//! `nmb-fake-server`: the loopback wire-format server as a process (prints `LISTENING <port>`, serves until killed).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(msg) = nmb_fake_server::run_cli(&args) {
        eprintln!("nmb-fake-server: {msg}");
        std::process::exit(2);
    }
}
