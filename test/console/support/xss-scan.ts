// The unescaped-children scan for @kitajs/html templates: flags every JSX child expression that may be a plain string rendered as HTML (a stand-in for @kitajs/ts-html-plugin, which needs TypeScript 5; docs/console.md).
import path from 'node:path';
import ts from 'typescript';

export interface XssFinding {
  file: string;
  line: number;
  text: string;
}

/** Calls that return escaped text. */
const ESCAPING_CALLS = new Set(['escapeHtml', 'Html.escapeHtml', 'e', 'Html.e']);

function program(files: string[]): ts.Program {
  const configPath = path.resolve('tsconfig.json');
  const read = ts.readConfigFile(configPath, ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(read.config, ts.sys, path.dirname(configPath));
  return ts.createProgram(files, { ...parsed.options, noEmit: true });
}

/**
 * A type is safe as a child when every part is a number, boolean, null/undefined, an array of safe parts, or a
 * JSX.Element (`string | Promise<string>`: a string beside a Promise in one union is a rendered element).
 */
function safeType(checker: ts.TypeChecker, type: ts.Type): boolean {
  const parts = type.isUnion() ? type.types : [type];
  const hasPromise = parts.some((t) => t.getSymbol()?.getName() === 'Promise');
  return parts.every((t) => {
    const f = t.getFlags();
    if (f & (ts.TypeFlags.NumberLike | ts.TypeFlags.BooleanLike | ts.TypeFlags.BigIntLike | ts.TypeFlags.Null | ts.TypeFlags.Undefined | ts.TypeFlags.Void | ts.TypeFlags.Never)) return true;
    if (f & ts.TypeFlags.StringLike) return hasPromise || (t.isStringLiteral() && !/[<&>"']/.test(t.value));
    if (t.getSymbol()?.getName() === 'Promise') return true;
    if (checker.isArrayType(t)) {
      const [el] = checker.getTypeArguments(t as ts.TypeReference);
      return el !== undefined && safeType(checker, el);
    }
    return false;
  });
}

function returnedExpressions(fn: ts.ArrowFunction | ts.FunctionExpression): ts.Expression[] {
  if (ts.isArrowFunction(fn) && !ts.isBlock(fn.body)) return [fn.body];
  const out: ts.Expression[] = [];
  const visit = (n: ts.Node): void => {
    if (ts.isReturnStatement(n) && n.expression) out.push(n.expression);
    if (!ts.isFunctionLike(n)) ts.forEachChild(n, visit);
  };
  ts.forEachChild(fn.body, visit);
  return out;
}

function allowed(checker: ts.TypeChecker, e: ts.Expression): boolean {
  if (ts.isJsxElement(e) || ts.isJsxSelfClosingElement(e) || ts.isJsxFragment(e)) return true;
  if (ts.isParenthesizedExpression(e) || ts.isAsExpression(e) || ts.isNonNullExpression(e)) return allowed(checker, e.expression);
  if (ts.isConditionalExpression(e)) return allowed(checker, e.whenTrue) && allowed(checker, e.whenFalse);
  if (ts.isBinaryExpression(e)) {
    const op = e.operatorToken.kind;
    if (op === ts.SyntaxKind.AmpersandAmpersandToken) return allowed(checker, e.right);
    if (op === ts.SyntaxKind.BarBarToken || op === ts.SyntaxKind.QuestionQuestionToken) return allowed(checker, e.left) && allowed(checker, e.right);
  }
  if (ts.isCallExpression(e)) {
    const callee = e.expression.getText();
    if (ESCAPING_CALLS.has(callee)) return true;
    if (ts.isPropertyAccessExpression(e.expression) && ['map', 'flatMap'].includes(e.expression.name.text)) {
      const fn = e.arguments[0];
      if (fn && (ts.isArrowFunction(fn) || ts.isFunctionExpression(fn))) return returnedExpressions(fn).every((r) => allowed(checker, r));
    }
  }
  return safeType(checker, checker.getTypeAtLocation(e));
}

function hasSafeAttribute(el: ts.JsxElement): boolean {
  return el.openingElement.attributes.properties.some((p) => ts.isJsxAttribute(p) && p.name.getText() === 'safe');
}

/** Every child expression of the given .tsx files that could put unescaped text into the HTML. */
export function scanForUnescapedChildren(files: string[]): XssFinding[] {
  const prog = program(files);
  const checker = prog.getTypeChecker();
  const findings: XssFinding[] = [];
  for (const file of files) {
    const sf = prog.getSourceFile(file);
    if (!sf) throw new Error(`not in the program: ${file}`);
    const visit = (n: ts.Node): void => {
      if (ts.isJsxExpression(n) && n.expression && ts.isJsxElement(n.parent) && !hasSafeAttribute(n.parent) && !allowed(checker, n.expression)) {
        const { line } = sf.getLineAndCharacterOfPosition(n.getStart());
        findings.push({ file: path.relative(process.cwd(), file), line: line + 1, text: n.getText() });
      }
      // A fragment's children are children too.
      if (ts.isJsxExpression(n) && n.expression && ts.isJsxFragment(n.parent) && !allowed(checker, n.expression)) {
        const { line } = sf.getLineAndCharacterOfPosition(n.getStart());
        findings.push({ file: path.relative(process.cwd(), file), line: line + 1, text: n.getText() });
      }
      ts.forEachChild(n, visit);
    };
    visit(sf);
  }
  return findings;
}
