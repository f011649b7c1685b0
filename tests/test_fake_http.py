import httpx
def test_fake(fake_http):
    fake_http.route("GET", "/x", lambda r: (200, {"a": r.arg("q")}))
    assert httpx.get(fake_http.url + "/x?q=1").json() == {"a": "1"}
    assert httpx.get(fake_http.url + "/nope").status_code == 404
