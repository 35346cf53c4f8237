"""Text a hostile visitor would put in a trace: markup, links and autolinks that every view must show inert."""
PAYLOAD = ("<img src=https://evil.example/x.png> <form><button>go</button></form> <h1>big</h1> <svg onload=1> "
           "http://evil.example/a www.evil.example b@evil.example [link](https://evil.example)")
