use std::process::Command;

#[test]
fn smoke() {
    if std::env::var("SMOKE_CHILD").is_ok() {
        let p = ferry::Pipe::from_parent().unwrap();
        while let Ok(m) = p.recv() {
            p.send(&m).unwrap();
        }
        return;
    }
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "smoke", "--nocapture"])
        .env("SMOKE_CHILD", "1");
    let (mut child, p) = ferry::spawn(cmd).unwrap();
    for size in [0usize, 1, 100, 10_000, 200_000, 1 << 20, 5 << 20] {
        let msg: Vec<u8> = (0..size).map(|i| i as u8).collect();
        p.send(&msg).unwrap();
        assert_eq!(p.recv().unwrap(), msg, "size {size}");
    }
    let t = std::time::Instant::now();
    for _ in 0..10000 {
        p.send(&[1; 144]).unwrap();
        p.recv().unwrap();
    }
    eprintln!("rt {:?}", t.elapsed() / 10000);
    drop(p);
    child.wait().unwrap();
}
