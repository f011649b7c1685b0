"""The fake HTTP server other back-end tests rely on answers routes and records requests."""

import httpx


def test_routes_answer_and_unknown_paths_404(fake_http):
    fake_http.route("GET", "/x", lambda r: (200, {"a": r.arg("q")}))
    assert httpx.get(fake_http.url + "/x?q=1").json() == {"a": "1"}
    assert httpx.get(fake_http.url + "/nope").status_code == 404
    assert [r.path for r in fake_http.requests] == ["/x", "/nope"]
