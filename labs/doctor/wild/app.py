# The doctor lab's Python application for gunicorn (WSGI, `app`) and uvicorn
# (ASGI, `asgi`): the routes the wild servers' checks use, with every server
# setting at its default. `/` answers "ok", `/big` 256 KiB (for the slow
# read), `POST /upload` reads the whole body and says how long it was (for
# the slow body); anything else is a 404.

BIG = b"x" * (256 * 1024)


def answer(path, body_length):
    if path == "/":
        return 200, b"ok\n"
    if path == "/big":
        return 200, BIG
    if path == "/upload" and body_length is not None:
        return 200, b"%d bytes\n" % body_length
    return 404, b""


def app(environ, start_response):
    body_length = None
    if environ["REQUEST_METHOD"] == "POST":
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body_length = len(environ["wsgi.input"].read(length))
    status, body = answer(environ["PATH_INFO"], body_length)
    start_response(
        "%d %s" % (status, "OK" if status == 200 else "Not Found"),
        [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))],
    )
    return [body]


async def asgi(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body_length = None
    if scope["method"] == "POST":
        body_length = 0
        while True:
            message = await receive()
            body_length += len(message.get("body", b""))
            if not message.get("more_body"):
                break
    status, body = answer(scope["path"], body_length)
    headers = [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
