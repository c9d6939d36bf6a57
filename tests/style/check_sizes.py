#!/usr/bin/python3
"""Library code stays small enough to read: no source file over MAX_FILE_LINES lines and no function
over MAX_FUNCTION_LINES (from the line its signature starts on to its closing brace).

A function is found the way a reader finds one: a brace opened at namespace or class scope whose
declaration has a parameter list and is not an initializer (`= {`), a class, an enum or a
namespace. Comments, strings and preprocessor lines are blanked first, so braces in them do not
count.
  check_sizes.py [--list] DIR...   (--list: print every function's length, longest first)
"""
import os
import re
import sys

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
SOURCE_ENDINGS = ('.h', '.cc', '.cu', '.cuh')


def blank_comments_and_strings(text):
    """The text with comments, string and char literals and preprocessor lines replaced by spaces
    (newlines kept, so line numbers still hold)."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == '#':
            while i < n and text[i] != '\n':
                if text[i] == '\\' and i + 1 < n and text[i + 1] == '\n':
                    out.append(' \n')
                    i += 2
                    continue
                out.append(' ')
                i += 1
            continue
        if c == '/' and text.startswith('//', i):
            while i < n and text[i] != '\n':
                out.append(' ')
                i += 1
            continue
        if c == '/' and text.startswith('/*', i):
            end = text.find('*/', i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:end]))
            i = end
            continue
        if c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            if m:
                close = ')' + m.group(1) + '"'
                end = text.find(close, i + m.end())
                end = n if end < 0 else end + len(close)
                out.append(re.sub(r'[^\n]', ' ', text[i:end]))
                i = end
                continue
        if c in '"\'':
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            out.append(' ' * (j + 1 - i))
            i = j + 1
            continue
        if not c.isspace():
            at_line_start = False
        if c == '\n':
            at_line_start = True
        out.append(c)
        i += 1
    return ''.join(out)


SCOPE = re.compile(r'^(template\s*<.*>\s*)?(namespace|class|struct|union|extern)\b', re.S)
ENUM = re.compile(r'^(template\s*<.*>\s*)?enum\b', re.S)


def opens_function(decl):
    """Whether a brace after this declaration (met at namespace or class scope) opens a function."""
    if '(' not in decl or SCOPE.match(decl) or ENUM.match(decl):
        return False
    name_part = re.sub(r'operator\s*\S+', '', decl.split('(')[0])
    return re.search(r'(?<![=!<>])=(?!=)', name_part) is None  # `T x = f({...})`: an initializer


def functions(text):
    """(name, first line, last line) of every function body at namespace or class scope."""
    code = blank_comments_and_strings(text)
    found = []
    holds_declarations = [True]  # per open brace: a namespace, class or extern block
    decl_start = 0
    body = None  # (offset where the function's declaration starts, brace depth outside it)
    for i, c in enumerate(code):
        if c == '{':
            decl = code[decl_start:i].strip()
            if body is None and holds_declarations[-1] and opens_function(decl):
                body = (decl_start + len(code[decl_start:i]) - len(code[decl_start:i].lstrip()), len(holds_declarations))
                holds_declarations.append(False)
            else:
                holds_declarations.append(body is None and holds_declarations[-1] and bool(SCOPE.match(decl)))
            decl_start = i + 1
        elif c == '}':
            holds_declarations.pop()
            if body is not None and len(holds_declarations) == body[1]:
                first = code.count('\n', 0, body[0]) + 1
                last = code.count('\n', 0, i) + 1
                names = re.findall(r'([~A-Za-z_][A-Za-z0-9_:<>~]*)\s*\(', code[body[0]:code.index('{', body[0])])
                found.append((names[0] if names else '?', first, last))
                body = None
            decl_start = i + 1
        elif body is None and (c == ';' or (c == ':' and re.search(r'\b(public|private|protected)\s*$', code[decl_start:i]))):
            decl_start = i + 1
    return found


def main(argv):
    list_all = '--list' in argv
    dirs = [a for a in argv if a != '--list']
    failures, rows = [], []
    for top in dirs:
        for dirpath, _, names in os.walk(top):
            for name in sorted(names):
                if not name.endswith(SOURCE_ENDINGS):
                    continue
                path = os.path.join(dirpath, name)
                text = open(path, encoding='utf-8').read()
                lines = text.count('\n')
                if lines > MAX_FILE_LINES:
                    failures.append(f'{path}: {lines} lines (at most {MAX_FILE_LINES} in library code: split it by concern)')
                for fn, first, last in functions(text):
                    length = last - first + 1
                    rows.append((length, f'{path}:{first}', fn))
                    if length > MAX_FUNCTION_LINES:
                        failures.append(f'{path}:{first}: {fn} is {length} lines (at most {MAX_FUNCTION_LINES})')
    if list_all:
        for length, where, fn in sorted(rows, reverse=True):
            print(f'{length:5d} {where} {fn}')
        return 0
    for f in failures:
        print('FAIL', f)
    print(f'check_sizes: {len(rows)} functions in {", ".join(dirs)}; {len(failures)} over the limits')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
