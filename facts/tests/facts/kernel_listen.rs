//! The kernel's listen queue, read from this machine: a connection to a
//! listening socket is established by the kernel before the process calls
//! `accept`, so a client of a server that cannot accept (out of file
//! descriptors, or busy) connects and sends without an error, and waits.

use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    time::Duration,
};

#[test]
fn a_listening_socket_completes_connections_nobody_accepted() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding");
    let addr = listener.local_addr().expect("the bound address");
    // Nobody calls accept yet: the handshake and the request are the kernel's.
    let mut client = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .expect("connecting to a socket that has not accepted");
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: facts\r\n\r\n")
        .expect("sending to a connection nobody accepted");
    // The connection waited in the queue with its bytes: accept takes it.
    let (mut served, _) = listener.accept().expect("the queued connection");
    served
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a read timeout");
    let mut request = [0u8; 14];
    served.read_exact(&mut request).expect("the queued request");
    assert_eq!(&request, b"GET / HTTP/1.1");
}
