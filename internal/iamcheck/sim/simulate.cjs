// Runs @cloud-copilot/iam-simulate on every simulation read from stdin, a
// JSON array of {id, simulation} (the library's Simulation shape), and
// writes a JSON array of {id, decision, errors, statements}: decision is
// Allowed, ExplicitlyDenied or ImplicitlyDenied (or Error), and statements
// name the ones that decided it, so a failing test can say why. CommonJS,
// so that NODE_PATH finds the library in .tools/iamsim/node_modules.
'use strict'
const { runSimulation } = require('@cloud-copilot/iam-simulate')

// decisive lists the statements that matched, by policy and Sid, with
// their effect; with none, every statement that matched the action and
// resource but not its principal or condition, which is why an expected
// grant did not apply.
// name is a statement's effect, policy and Sid (or position).
function name(s) {
  return `${s.explain.effect} ${s.policyId ? s.policyId + '/' : ''}${s.explain.identifier}`
}

function decisive(analysis) {
  const out = []
  const near = []
  for (const [where, a] of [['identity', analysis?.identityAnalysis], ['resource', analysis?.resourceAnalysis]]) {
    if (!a) continue
    for (const s of [...(a.denyStatements || []), ...(a.allowStatements || [])]) {
      out.push(`${where} ${name(s)}`)
    }
    for (const s of a.unmatchedStatements || []) {
      if (s.actionMatch && s.resourceMatch) {
        near.push(`${where} ${name(s)} did not apply: principal ${s.principalMatch}, condition ${s.conditionMatch}`)
      }
    }
  }
  if (out.length) return out
  return near.length ? near : ['no statement matches the action and resource']
}

async function main() {
  let input = ''
  for await (const chunk of process.stdin) input += chunk
  const results = []
  for (const { id, simulation } of JSON.parse(input)) {
    const r = await runSimulation(simulation, {})
    if (r.resultType === 'error') {
      results.push({ id, decision: 'Error', errors: JSON.stringify(r.errors) })
      continue
    }
    const analyses = r.resultType === 'single' ? [r.result.analysis] : r.results.map((x) => x.analysis)
    results.push({ id, decision: r.overallResult, statements: analyses.flatMap(decisive) })
  }
  process.stdout.write(JSON.stringify(results))
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
