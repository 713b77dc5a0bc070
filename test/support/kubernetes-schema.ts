// Kubernetes objects checked against the API's OpenAPI schemas as kubernetes-models compiles them: values, types and required fields by its validators, unknown fields by its type declarations through the TypeScript compiler; and the fields of a core type as those declarations name them.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import ts from 'typescript';
import type { Manifest } from './helm.js';

/** kubernetes-models lays its models out as `<group>/<version>/<Kind>` (the core group as `v1/<Kind>`). */
const modelPath = (m: Manifest) => `kubernetes-models/${m.apiVersion}/${m.kind}`;
const label = (m: Manifest) => `${m.kind} ${m.metadata?.name ?? '(no name)'}`;

type ModelClass = new (data: unknown) => { validate(): void };

/**
 * The validators kubernetes-models generates from the OpenAPI schemas check every known field's type, format and
 * enumeration, and the required fields; like the API's schemas, they let unknown fields pass (a server drops them).
 */
async function valueProblems(manifests: Manifest[]): Promise<string[]> {
  const problems: string[] = [];
  for (const m of manifests) {
    let Model: ModelClass | undefined;
    try {
      Model = ((await import(modelPath(m))) as Record<string, ModelClass>)[m.kind];
    } catch {
      Model = undefined;
    }
    if (Model === undefined) {
      problems.push(`${label(m)}: no schema for ${m.apiVersion} ${m.kind}`);
      continue;
    }
    try {
      new Model(m).validate();
    } catch (err) {
      problems.push(`${label(m)}: ${(err as Error).message}`);
    }
  }
  return problems;
}

/**
 * Unknown fields, the strict check (kubectl's `--validate=strict`): each manifest becomes an object literal typed as
 * the package's interface for its kind, and the compiler's excess-property check names a field the schema lacks, at
 * any depth. Files are virtual, beside this one so that the package resolves from the project's node_modules.
 */
function typeProblems(manifests: Manifest[]): string[] {
  const files = new Map<string, { manifest: Manifest; text: string }>();
  manifests.forEach((m, i) => {
    const text = `import type { I${m.kind} } from '${modelPath(m)}';\nexport const manifest: I${m.kind} = ${JSON.stringify(m, null, 1)};\n`;
    files.set(path.join(import.meta.dirname, `.manifest-${i}.ts`), { manifest: m, text });
  });
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ['lib.es2022.d.ts'],
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  host.getSourceFile = (name, version, ...rest) => {
    const file = files.get(name);
    return file ? ts.createSourceFile(name, file.text, version) : getSourceFile.call(host, name, version, ...rest);
  };
  host.fileExists = (name) => files.has(name) || fileExists.call(host, name);
  host.readFile = (name) => files.get(name)?.text ?? readFile.call(host, name);
  const program = ts.createProgram({ rootNames: [...files.keys()], options, host });
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const owner = d.file ? files.get(d.file.fileName) : undefined;
    const where = owner ? label(owner.manifest) : (d.file?.fileName ?? 'TypeScript');
    return `${where}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
  });
}

/** Every problem the schemas find in the manifests, one line each naming the object; [] when all are valid. */
export async function schemaProblems(manifests: Manifest[]): Promise<string[]> {
  return [...(await valueProblems(manifests)), ...typeProblems(manifests)];
}

/**
 * The fields of a core/v1 type as kubernetes-models declares it (`v1/<Kind>.d.ts`, interface `I<Kind>`), each with the
 * values it allows when the schema enumerates them (a union of string literals), else null.
 */
export function kubernetesFields(kind: string): Map<string, string[] | null> {
  const file = path.join(path.dirname(createRequire(import.meta.url).resolve('kubernetes-models/package.json')), 'v1', `${kind}.d.ts`);
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022);
  const declaration = source.statements.find((s): s is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(s) && s.name.text === `I${kind}`);
  if (!declaration) throw new Error(`${file}: no interface I${kind}`);
  const fields = new Map<string, string[] | null>();
  for (const member of declaration.members) {
    if (!ts.isPropertySignature(member) || !member.name || !ts.isStringLiteral(member.name)) continue;
    const type = member.type;
    const literals = type && ts.isUnionTypeNode(type) ? type.types.map((t) => (ts.isLiteralTypeNode(t) && ts.isStringLiteral(t.literal) ? t.literal.text : null)) : null;
    fields.set(member.name.text, literals?.every((l) => l !== null) ? (literals as string[]) : null);
  }
  return fields;
}
